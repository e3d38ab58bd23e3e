"""A model's config.json pasted whole: the exact shape, so the estimate needs no catalog entry."""
from __future__ import annotations

import json
import re
from typing import Iterator

from . import Finding
from .deepspeed import enclosing_object

NAME = "model_config"
PRODUCES = {"model.config", "model.vocab", "model.params_b", "model.name", "model.load_dtype"}

_ANCHOR = re.compile(r'"(?:num_hidden_layers|n_layer|num_layers)"\s{0,8}:\s{0,8}\d')
_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def extract(text: str) -> Iterator[Finding]:
    anchor = _ANCHOR.search(text)
    if not anchor:
        return
    raw = enclosing_object(text, anchor.start())
    try:
        config = json.loads(raw) if raw else None
    except ValueError:
        return
    if not isinstance(config, dict) or "hidden_size" not in config and "n_embd" not in config:
        return
    from ..catalog import shape_from_config

    shape = shape_from_config(config)
    if shape is None:
        return
    detail = f'config.json model_type "{config.get("model_type", "?")}"'
    yield Finding("model.config", json.dumps(config, sort_keys=True), detail)
    yield Finding("model.params_b", round(shape.param_count() / 1e9, 3), detail)
    if isinstance(config.get("vocab_size"), int):
        yield Finding("model.vocab", config["vocab_size"], detail)
    name = config.get("_name_or_path")
    if isinstance(name, str) and name:
        from ..catalog import resolve_model_id
        model_id = resolve_model_id(name)
        if model_id:
            yield Finding("model.name", model_id, f"_name_or_path {name}")
