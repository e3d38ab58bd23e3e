"""Model-architecture and GPU catalogs.

Public API::

    from oomdoctor.catalog import (
        ModelShape, Linear, generic, parse_size,               # shapes and parameter counting
        load_models, get_model, all_models,                    # knowledge/models.yaml
        resolve_model, find_models_in_text, ModelMention,      # name resolution
        GPU, load_gpus, get_gpu, all_gpus, resolve_gpu,        # knowledge/gpus.yaml
        resolve_gpu_scored, find_gpus_in_text, parse_nvidia_smi_name, parse_nvidia_smi,
        shape_from_config, resolve_model_id, resolve_gpu_id,   # id-level helpers for extractors
        find_model_mentions, find_gpu_mentions,
        CatalogError, ShapeError, UnsupportedModelType,
    )
"""

from .fuzzy import ModelMention, find_models_in_text, normalize_tokens, resolve_model
from .gpus import (
    GPU,
    GpuMention,
    SmiGpu,
    all_gpus,
    find_gpus_in_text,
    get_gpu,
    load_gpus,
    parse_nvidia_smi,
    parse_nvidia_smi_name,
    resolve_gpu,
    resolve_gpu_scored,
)
from .models import CatalogError, all_models, get_model, load_models
from .shape import (
    SUPPORTED_MODEL_TYPES,
    Linear,
    ModelShape,
    ShapeError,
    UnsupportedModelType,
    generic,
    parse_size,
)



def shape_from_config(config: dict) -> ModelShape | None:
    """``ModelShape.from_hf_config`` that returns ``None`` for unsupported or broken configs."""
    try:
        return ModelShape.from_hf_config(config)
    except ShapeError:
        return None


def resolve_model_id(text: str) -> str | None:
    """Catalog id of the model a name refers to, or ``None``."""
    shape = resolve_model(text)[0]
    return shape.id if shape is not None else None


def resolve_gpu_id(text: str) -> str | None:
    """Catalog id of the GPU a name refers to, or ``None``."""
    gpu = resolve_gpu(text)
    return gpu.id if gpu is not None else None


def find_model_mentions(text: str) -> list[tuple[str, str]]:
    """``(model id, matched text)`` for each model named in ``text``."""
    return [(m.shape.id, m.text) for m in find_models_in_text(text)]


def find_gpu_mentions(text: str) -> list[tuple[str, float, str]]:
    """``(gpu id, memory GiB, matched text)`` for each GPU named in ``text``."""
    return [(m.gpu.id, round(m.gpu.memory_mib / 1024, 4), m.text) for m in find_gpus_in_text(text)]


__all__ = [
    "ModelShape", "Linear", "generic", "parse_size", "SUPPORTED_MODEL_TYPES",
    "load_models", "get_model", "all_models",
    "resolve_model", "find_models_in_text", "ModelMention", "normalize_tokens",
    "GPU", "GpuMention", "SmiGpu", "load_gpus", "get_gpu", "all_gpus", "resolve_gpu",
    "resolve_gpu_scored", "find_gpus_in_text", "parse_nvidia_smi_name", "parse_nvidia_smi",
    "shape_from_config", "resolve_model_id", "resolve_gpu_id", "find_model_mentions", "find_gpu_mentions",
    "CatalogError", "ShapeError", "UnsupportedModelType",
]
