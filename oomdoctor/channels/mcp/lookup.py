"""The model and GPU catalogs looked up by a name as people type it.

The catalog's own resolvers decide the match (the one the estimator would use); when they find
none, or to show what else is close, the entries whose names are nearest by edit distance follow
as candidates, so that an assistant can ask the user which one they meant instead of guessing.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from rapidfuzz import fuzz

from ...catalog import GPU, ModelShape, all_gpus, all_models, normalize_tokens, resolve_gpu_scored, resolve_model

# A candidate below this similarity (0-100) is noise, not a near miss.
MIN_SIMILARITY = 60.0
MAX_RESULTS = 20


def model_entry(shape: ModelShape) -> dict[str, Any]:
    entry = {"id": shape.id, "family": shape.family, "size": shape.size, "hf_id": shape.hf_id,
             "names": list(shape.names), "params_b": round(shape.params_billion(), 3),
             "layers": shape.layers, "hidden": shape.hidden, "heads": shape.heads, "kv_heads": shape.kv_heads,
             "vocab": shape.vocab, "max_position": shape.max_position, "tied_embeddings": shape.tied_embeddings}
    if shape.experts:
        entry.update(experts=shape.experts, experts_active=shape.experts_active,
                     active_params_b=round(shape.active_param_count() / 1e9, 3))
    if shape.notes:
        entry["notes"] = shape.notes
    return entry


def gpu_entry(gpu: GPU) -> dict[str, Any]:
    entry = {"id": gpu.id, "names": list(gpu.names), "vendor": gpu.vendor, "tier": gpu.tier, "arch": gpu.arch,
             "memory_gib": round(gpu.memory_gib, 2), "memory_source": gpu.memory_source, "bf16": gpu.bf16,
             "fp8": gpu.fp8}
    if gpu.notes:
        entry["notes"] = gpu.notes
    return entry


def _model_key(name: str) -> str:
    return " ".join(normalize_tokens(name))


def _gpu_key(name: str) -> str:
    return " ".join(name.lower().replace("-", " ").replace("_", " ").split())


def _nearest(query: str, items: Iterable[Any], names: Callable[[Any], Iterable[str]], key: Callable[[str], str],
             limit: int) -> list[tuple[Any, float]]:
    wanted = key(query)
    scored = []
    for item in items:
        best = max((fuzz.WRatio(wanted, key(name)) for name in names(item) if key(name)), default=0.0)
        if best >= MIN_SIMILARITY:
            scored.append((item, round(float(best), 1)))
    scored.sort(key=lambda pair: (-pair[1], pair[0].id))
    return scored[:limit]


def _look_up(query: str, limit: int, resolved, items, names, key, entry) -> dict[str, Any]:
    query = query.strip()
    if not query:
        # No name: what the catalog holds, by id, to choose from.
        return {"query": "", "match": None, "candidates": [], "catalog": [item.id for item in items]}
    item, score, alias = resolved
    match = {**entry(item), "score": round(float(score), 1), "matched_name": alias} if item is not None else None
    candidates = [{**entry(other), "similarity": similarity}
                  for other, similarity in _nearest(query, items, names, key, limit + 1)
                  if item is None or other.id != item.id][:limit]
    return {"query": query, "match": match, "candidates": candidates}


def models(query: str, limit: int = 5) -> dict[str, Any]:
    """The catalog model a name refers to (as the estimator resolves it) and the nearest others."""
    items = all_models()
    return _look_up(query, min(limit, MAX_RESULTS), resolve_model(query) if query.strip() else (None, 0, ""),
                    items, lambda m: (m.id, m.hf_id, *m.names), _model_key, model_entry)


def gpus(query: str, limit: int = 5) -> dict[str, Any]:
    """The catalog GPU a name refers to (as the estimator resolves it) and the nearest others."""
    items = all_gpus()
    return _look_up(query, min(limit, MAX_RESULTS), resolve_gpu_scored(query) if query.strip() else (None, 0, ""),
                    items, lambda g: (g.id, *g.names), _gpu_key, gpu_entry)
