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
import functools
import re


from .fuzzy import ModelMention, find_models_in_text, resolve_model
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
from .hf_config import from_hf_config, to_hf_config
from .models import CatalogError, all_models, get_model, load_models
from .names import normalize_tokens
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
    """``from_hf_config`` that returns ``None`` for unsupported or broken configs."""
    try:
        return from_hf_config(config)
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


_PIECE = 4000
_OVERLAP = 200
# Lines worth handing to the (slower) token scanners, found with str.find, which
# runs at memory speed even on a 10 MiB log. The words come from the catalogs: the
# leading word of every model and card alias ("qwen", "千问", "nvidia", "a100"); a
# consumer card's bare number ("4090") counts only where the line calls it a card
# ("on a 4090", "2x3090", "4090显卡").
_LEADING_WORD = re.compile(r"[^\s\-_/]+")


@functools.lru_cache(maxsize=1)
def _scan_words() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    def leading(name: str) -> str:
        match = _LEADING_WORD.match(name.lower())
        return match.group(0) if match else ""

    model_words = set()
    for model in all_models():
        for name in (model.id, *model.names):
            stem = re.match(r"\D+", leading(name))
            if stem and len(stem.group(0)) >= 2:
                model_words.add(stem.group(0))
    gpu_words, card_numbers = set(), set()
    for gpu in all_gpus():
        for name in (gpu.id, *gpu.names):
            word = leading(name)
            if word[:1].isdigit():
                card_numbers.add(word[:4])
            elif len(word) >= 2:
                gpu_words.add(word)
    return tuple(sorted(model_words)), tuple(sorted(gpu_words)), tuple(sorted(card_numbers))


_CARD_CONTEXT = re.compile(r"(?i)(?:\b(?:on|a|an|with|my|two|four|eight|single)\s{0,2}|\d\s{0,2}[x×*]\s{0,2}|(?:单卡|张|块)\s{0,2})"
                           r"\d{4}(?!\d)|\b\d{4}\s{0,2}(?:ti|super|d)?\s{0,2}(?:显卡|卡|gpu|card)")


def _lines_with(text: str, lowered: str, words: tuple[str, ...]) -> dict[int, str]:
    """Start offset -> line, for every line that holds one of the words (long lines cut around it)."""
    found: dict[int, str] = {}
    for word in words:
        pos = lowered.find(word)
        while pos >= 0:
            start = text.rfind("\n", 0, pos) + 1
            end = text.find("\n", pos)
            end = len(text) if end < 0 else end
            if end - start > _PIECE:
                start, end = max(start, pos - _OVERLAP), min(end, pos + _PIECE)
            found.setdefault(start, text[start:end])
            pos = lowered.find(word, max(end, pos + 1))
    return found


def _pieces(found: dict[int, str]) -> list[str]:
    """Distinct candidate lines in order of appearance: a log repeats its lines thousands of times."""
    seen: set[str] = set()
    out = []
    for _, line in sorted(found.items()):
        if line not in seen:
            seen.add(line)
            out.append(line)
    return out


def find_model_mentions(text: str) -> list[tuple[str, str]]:
    """``(model id, matched text)`` for each model named in ``text``, in order of first appearance."""
    lines = _pieces(_lines_with(text, text.lower(), _scan_words()[0]))
    return [(m.shape.id, m.text) for piece in lines for m in find_models_in_text(piece)]


# A model name as people write one: an optional Hub owner, then letters/digits joined by - _ . (bounded parts,
# no nested quantifiers); only names with a size ("8b", "0.5B", "8x7b") are kept, see find_model_names.
_NAME_RE = re.compile(r"(?<![\w./-])((?:[A-Za-z0-9][\w.-]{0,38}/)?[A-Za-z][A-Za-z0-9]{0,30}(?:[-_.][A-Za-z0-9]{1,30}){1,8})"
                      r"(?![\w/-])")
_HAS_SIZE = re.compile(r"(?i)(?<![a-z0-9])(?:\d{1,3}x)?\d{1,4}(?:\.\d{1,3})?[bm](?![a-z0-9])")
_MAX_NAME_SCAN = 64


def find_model_names(text: str) -> list[tuple[str, str]]:
    """``(name, matched text)`` for model names the catalog does not know but that say their size
    ("openchat-3.6-8b", "org/Some-Finetune-13B"): the estimate reads them through the Hub (when the lookup is
    on) or from the name (``hub.lookup``).  Names the catalog knows are ``find_model_mentions``'."""
    from .hub import repo_id_of
    from .name_parse import parse_model_name

    if not isinstance(text, str) or not text:
        return []
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for m in _NAME_RE.finditer(text[:4_000_000]):
        name = m.group(1).rstrip(".")
        if name in seen or not _HAS_SIZE.search(name):
            continue
        seen.add(name)
        if len(seen) > _MAX_NAME_SCAN:
            break
        if resolve_model_id(name) is not None:
            continue
        if repo_id_of(name) is not None or parse_model_name(name) is not None:
            out.append((name, m.group(1)))
    return out


def find_gpu_mentions(text: str) -> list[tuple[str, float, str]]:
    """``(gpu id, memory GiB, matched text)`` for each GPU named in ``text``, in order of first appearance."""
    lowered = text.lower()
    _, gpu_words, card_numbers = _scan_words()
    found = _lines_with(text, lowered, gpu_words)
    for start, line in _lines_with(text, lowered, card_numbers).items():
        if _CARD_CONTEXT.search(line):
            found.setdefault(start, line)
    return [(m.gpu.id, round(m.gpu.memory_mib / 1024, 4), m.text)
            for piece in _pieces(found) for m in find_gpus_in_text(piece)]


__all__ = [
    "ModelShape", "Linear", "generic", "parse_size", "SUPPORTED_MODEL_TYPES", "from_hf_config", "to_hf_config",
    "load_models", "get_model", "all_models",
    "resolve_model", "find_models_in_text", "ModelMention", "normalize_tokens",
    "GPU", "GpuMention", "SmiGpu", "load_gpus", "get_gpu", "all_gpus", "resolve_gpu",
    "resolve_gpu_scored", "find_gpus_in_text", "parse_nvidia_smi_name", "parse_nvidia_smi",
    "shape_from_config", "resolve_model_id", "resolve_gpu_id", "find_model_mentions", "find_gpu_mentions",
    "find_model_names",
    "CatalogError", "ShapeError", "UnsupportedModelType",
]
