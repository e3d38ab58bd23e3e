"""Load and validate ``knowledge/models.yaml`` into :class:`ModelShape` objects."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml
from .. import yaml_safe
from ..schema import suggest as did_you_mean

from .hf_config import from_hf_config
from .names import alias_keys
from .shape import EXPERT_NAMES, LAYOUTS, ROUTER_NAMES, ModelShape, ShapeError, _TYPE_DEFAULTS

__all__ = [
    "CatalogError",
    "DEFAULT_MODELS_PATH",
    "load_models",
    "get_model",
    "all_models",
    "did_you_mean",
]

KNOWLEDGE_DIR = Path(__file__).resolve().parents[2] / "knowledge"
DEFAULT_MODELS_PATH = KNOWLEDGE_DIR / "models.yaml"


class CatalogError(ValueError):
    """A catalog file is malformed; the message names the file and the entry."""


REQUIRED_KEYS: dict[str, type | tuple[type, ...]] = {
    "id": str,
    "names": list,
    "hf_id": str,
    "model_type": str,
    "layers": int,
    "hidden": int,
    "heads": int,
    "kv_heads": int,
    "head_dim": int,
    "intermediate": int,
    "vocab": int,
    "tied_embeddings": bool,
    "attention_bias": bool,
    "o_bias": bool,
    "mlp_bias": bool,
    "norm": str,
    "max_position": int,
    "source": str,
}
OPTIONAL_KEYS: dict[str, type | tuple[type, ...]] = {
    "family": str,
    "size": str,
    "verified_via": str,
    "notes": str,
    "norms_per_layer": int,
    "qk_norm": bool,
    "layout": str,
    "lm_head_bias": bool,
    "sliding_window": int,
    "moe": dict,
    "mla": dict,
}
MOE_KEYS: dict[str, type | tuple[type, ...]] = {
    "experts": int,
    "experts_active": int,
    "moe_intermediate": int,
    "shared_expert_intermediate": int,
    "shared_expert_gate": bool,
    "router_bias": bool,
    "dense_layers": list,
    "expert_naming": str,
}
MOE_REQUIRED = ("experts", "experts_active")
# An entry generated from a real config.json (scripts/build_catalog.py): the shape is read from the file.
CONFIG_ENTRY_KEYS: dict[str, type | tuple[type, ...]] = {
    "id": str, "names": list, "hf_id": str, "config": dict, "source": str,
    "family": str, "size": str, "source_note": str,
}
CONFIG_ENTRY_REQUIRED = ("id", "names", "hf_id", "config", "source")
# Inline shapes (typed by hand, for architectures whose config.json could not be found) are limited to the
# Llama-family types the first catalog was written in; every other architecture needs its config.json.
INLINE_TYPES = ("baichuan", "chatglm", "deepseek_v2", "gemma", "gemma2", "gemma3_text", "glm", "internlm2",
                "llama", "mistral", "mixtral", "phi3", "phimoe", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe")
MLA_KEYS: dict[str, type | tuple[type, ...]] = {
    "q_lora_rank": int,
    "kv_lora_rank": int,
    "qk_nope_head_dim": int,
    "qk_rope_head_dim": int,
    "v_head_dim": int,
}


def _type_name(t: type | tuple[type, ...]) -> str:
    if isinstance(t, tuple):
        return " or ".join(x.__name__ for x in t)
    return {"dict": "mapping", "list": "list"}.get(t.__name__, t.__name__)


def _check_type(value: Any, expected: type | tuple[type, ...]) -> bool:
    if expected is int or (isinstance(expected, tuple) and int in expected):
        if isinstance(value, bool):
            return expected is bool or (isinstance(expected, tuple) and bool in expected)
    return isinstance(value, expected)


def _check_keys(where: str, data: Mapping[str, Any], allowed: Mapping[str, Any],
                required: Iterable[str]) -> None:
    for key in data:
        if key not in allowed:
            raise CatalogError(f"{where}: unknown key {key!r}{did_you_mean(str(key), allowed)}")
    for key in required:
        if key not in data:
            raise CatalogError(f"{where}: missing required key {key!r}")
    for key, value in data.items():
        expected = allowed[key]
        if not _check_type(value, expected):
            raise CatalogError(
                f"{where}: key {key!r} must be {_type_name(expected)}, got {type(value).__name__} {value!r}"
            )


_CONFIGS: dict[str, dict[str, Any]] = {}


def catalog_config(model_id: str) -> dict[str, Any] | None:
    """The config.json keys a generated catalog entry was built from (None for typed entries)."""
    load_models()
    return _CONFIGS.get(model_id)


def _config_entry_to_shape(where: str, entry: Mapping[str, Any]) -> ModelShape:
    _check_keys(where, entry, CONFIG_ENTRY_KEYS, CONFIG_ENTRY_REQUIRED)
    try:
        shape = from_hf_config(entry["config"], id=entry["id"])
    except ShapeError as exc:
        raise CatalogError(f"{where}: config: {exc}") from None
    _CONFIGS[entry["id"]] = dict(entry["config"])
    return shape.replace(family=entry.get("family", ""), size=entry.get("size", ""), hf_id=entry["hf_id"],
                         names=tuple(entry["names"]), source=entry["source"], notes=entry.get("source_note", ""),
                         source_config="config.json")


def _entry_to_shape(path: str, idx: int, entry: Any) -> ModelShape:
    if not isinstance(entry, Mapping):
        raise CatalogError(f"{path}: entry #{idx} must be a mapping, got {type(entry).__name__}")
    ident = entry.get("id") if isinstance(entry.get("id"), str) else f"#{idx}"
    where = f"{path}: model {ident!r}"
    names = entry.get("names")
    if isinstance(names, list) and (not names or not all(isinstance(n, str) and n.strip() for n in names)):
        raise CatalogError(f"{where}: 'names' must be a non-empty list of non-empty strings")
    if isinstance(entry.get("source"), str) and not entry["source"].startswith("https://"):
        raise CatalogError(f"{where}: 'source' must be an https:// URL, got {entry['source']!r}")
    if "config" in entry:
        return _config_entry_to_shape(where, entry)
    allowed = {**REQUIRED_KEYS, **OPTIONAL_KEYS}
    _check_keys(where, entry, allowed, REQUIRED_KEYS)
    names = entry["names"]
    if not names or not all(isinstance(n, str) and n.strip() for n in names):
        raise CatalogError(f"{where}: 'names' must be a non-empty list of non-empty strings")
    if not entry["source"].startswith("https://"):
        raise CatalogError(f"{where}: 'source' must be an https:// URL, got {entry['source']!r}")
    mt = entry["model_type"]
    if mt not in INLINE_TYPES:
        raise CatalogError(f"{where}: unknown model_type {mt!r}{did_you_mean(mt, INLINE_TYPES)} "
                           f"(other architectures are read from their config.json: give 'config')")
    layout_d, naming_d, npl_d, qkn_d, _norm_d = _TYPE_DEFAULTS[mt]
    if "layout" in entry and entry["layout"] not in LAYOUTS:
        raise CatalogError(f"{where}: unknown layout {entry['layout']!r}{did_you_mean(entry['layout'], LAYOUTS)}")
    if entry["norm"] not in ("rmsnorm", "layernorm"):
        raise CatalogError(f"{where}: norm must be 'rmsnorm' or 'layernorm'{did_you_mean(entry['norm'], ('rmsnorm', 'layernorm'))}")

    kw: dict[str, Any] = dict(
        id=entry["id"], model_type=mt, layers=entry["layers"], hidden=entry["hidden"], heads=entry["heads"],
        kv_heads=entry["kv_heads"], head_dim=entry["head_dim"], intermediate=entry["intermediate"],
        vocab=entry["vocab"], tied_embeddings=entry["tied_embeddings"], attention_bias=entry["attention_bias"],
        o_bias=entry["o_bias"], mlp_bias=entry["mlp_bias"], norm=entry["norm"],
        lm_head_bias=entry.get("lm_head_bias", False),
        norms_per_layer=entry.get("norms_per_layer", npl_d), qk_norm=entry.get("qk_norm", qkn_d),
        layout=entry.get("layout", layout_d), expert_naming=naming_d,
        max_position=entry["max_position"], family=entry.get("family", ""), size=entry.get("size", ""),
        hf_id=entry["hf_id"], names=tuple(names), source=entry["source"], notes=entry.get("notes", ""),
        router_name=ROUTER_NAMES.get(mt, "gate"),
    )
    if "moe" in entry:
        moe = entry["moe"]
        _check_keys(f"{where}, moe", moe, MOE_KEYS, MOE_REQUIRED)
        naming = moe.get("expert_naming", naming_d)
        if naming not in EXPERT_NAMES:
            raise CatalogError(f"{where}, moe: unknown expert_naming {naming!r}{did_you_mean(naming, EXPERT_NAMES)}")
        dense = moe.get("dense_layers", [])
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in dense):
            raise CatalogError(f"{where}, moe: dense_layers must be a list of layer indices")
        kw.update(
            experts=moe["experts"], experts_active=moe["experts_active"],
            moe_intermediate=moe.get("moe_intermediate", 0),
            shared_expert_intermediate=moe.get("shared_expert_intermediate", 0),
            shared_expert_gate=moe.get("shared_expert_gate", False), router_bias=moe.get("router_bias", False),
            dense_layers=tuple(dense), expert_naming=naming,
        )
    if "mla" in entry:
        mla = entry["mla"]
        _check_keys(f"{where}, mla", mla, MLA_KEYS, MLA_KEYS)
        kw.update(mla)
    try:
        return ModelShape(**kw)
    except ShapeError as exc:
        raise CatalogError(f"{where}: {exc}") from None


def parse_models(data: Any, path: str = "<models.yaml>") -> dict[str, ModelShape]:
    """Validate an already-parsed YAML document; returns shapes keyed by id."""
    if not isinstance(data, Mapping) or "models" not in data:
        keys = list(data) if isinstance(data, Mapping) else []
        hint = did_you_mean(str(keys[0]), ["models"]) if keys else ""
        raise CatalogError(f"{path}: top level must be a mapping with a 'models' list{hint}")
    extra = [k for k in data if k != "models"]
    if extra:
        raise CatalogError(f"{path}: unknown top-level key {extra[0]!r}{did_you_mean(str(extra[0]), ['models'])}")
    entries = data["models"]
    if not isinstance(entries, list) or not entries:
        raise CatalogError(f"{path}: 'models' must be a non-empty list")
    out: dict[str, ModelShape] = {}
    for idx, entry in enumerate(entries):
        shape = _entry_to_shape(path, idx, entry)
        if shape.id in out:
            raise CatalogError(f"{path}: model {shape.id!r}: duplicate id")
        out[shape.id] = shape
    # aliases must not point at two different entries
    owner: dict[tuple[str, ...], str] = {}
    for shape in out.values():
        for alias, key in alias_keys(shape):
            prev = owner.get(key)
            if prev is not None and prev != shape.id:
                raise CatalogError(
                    f"{path}: model {shape.id!r}: alias {alias!r} normalises to {' '.join(key)!r}, "
                    f"which already names model {prev!r}"
                )
            owner[key] = shape.id
    return out


def _read_yaml(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return yaml_safe.load(fh)
    except FileNotFoundError:
        raise CatalogError(f"{path}: file not found") from None
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path}: invalid YAML: {exc}") from None


@functools.lru_cache(maxsize=8)
def _load_cached(path: str, mtime: float) -> dict[str, ModelShape]:
    return parse_models(_read_yaml(Path(path)), path)


def load_models(path: str | os.PathLike[str] | None = None) -> dict[str, ModelShape]:
    """All catalog shapes keyed by id (cached; reloaded when the file changes)."""
    p = Path(path) if path is not None else DEFAULT_MODELS_PATH
    try:
        mtime = p.stat().st_mtime
    except FileNotFoundError:
        raise CatalogError(f"{p}: file not found") from None
    return dict(_load_cached(str(p), mtime))


def all_models(path: str | os.PathLike[str] | None = None) -> list[ModelShape]:
    return list(load_models(path).values())


def get_model(model_id: str, path: str | os.PathLike[str] | None = None) -> ModelShape:
    """The shape with this catalog id; ``KeyError`` with a suggestion otherwise."""
    models = load_models(path)
    try:
        return models[model_id]
    except KeyError:
        raise KeyError(f"no model {model_id!r} in the catalog{did_you_mean(model_id, models)}") from None
