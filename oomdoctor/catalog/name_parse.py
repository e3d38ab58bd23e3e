"""A model's family and size read from its name, when neither the Hub nor the catalog knows it.

``Qwen3-0.6`` is Qwen 3 at 0.6 B, ``Qwen2.5-Coder-32B`` a Qwen 2.5 of 32 B,
``Llama-Guard-3-8B`` a Llama 3 of 8 B, ``Mixtral-8x7B`` eight experts of 7 B,
``Qwen3-30B-A3B`` 30 B with 3 B active, ``llama-7b-hf`` a LLaMA of 7 B with no
version.  The family is matched against the catalog's own families (the tokens
of a catalog model's names other than its size); the architecture assumed is
the catalog member of that family whose size is nearest, when it is within
15 %, else a Llama-style dense shape of the parsed size (``shape.generic``).
Every result states its assumption and asks for the ``config.json``.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .names import normalize_tokens
from .shape import ModelShape, ShapeError, generic

__all__ = ["ParsedName", "parse_model_name", "parse_size_tokens"]

_SIZE = re.compile(r"^(?:(\d{1,3})x)?(\d{1,4}(?:\.\d{1,3})?)([bm])$")
_ACTIVE = re.compile(r"^a(\d{1,4}(?:\.\d{1,3})?)b$")
_NUMBER = re.compile(r"^\d{1,4}(?:\.\d{1,3})?$")
NEAR = 0.15


@dataclass(frozen=True)
class ParsedName:
    shape: ModelShape
    family: str              # the catalog family matched, or "" when none
    size_b: float            # total parameters the name states, in billions
    active_b: float | None   # "A3B": parameters active per token
    template: str            # the catalog id whose architecture was taken, or "" for a generic shape
    text: dict[str, str]     # the assumption in both languages

    def describe(self) -> str:
        return self.text["en"]


def parse_size_tokens(tokens: tuple[str, ...], family_version: str = "") -> tuple[float | None, float | None]:
    """(total billions, active billions) from name tokens: "7b", "0.5b", "500m", "8x7b", "a3b", or a bare
    number right after the family's own version ("Qwen3-0.6": version "3", size 0.6)."""
    total = active = None
    for t in tokens:
        m = _SIZE.match(t)
        if m and total is None:
            n = int(m.group(1) or 1)
            v = float(m.group(2)) / (1000.0 if m.group(3) == "m" else 1.0)
            total = n * v
            continue
        a = _ACTIVE.match(t)
        if a:
            active = float(a.group(1))
    if total is None and family_version and family_version in tokens:
        # a unit-less size only right after the family's version: "Qwen3-0.6" (not the "5" of "T5")
        after = tokens[tokens.index(family_version) + 1:]
        if after and _NUMBER.match(after[0]):
            v = float(after[0])
            if 0.05 <= v <= 2000:
                total = v
    return total, active


def _families():
    from .models import all_models

    out: dict[tuple[str, ...], list[ModelShape]] = {}
    for shape in all_models():
        for alias in (shape.id, shape.hf_id, *shape.names):
            toks = normalize_tokens(alias)
            key = tuple(t for t in toks if not (_SIZE.match(t) or _ACTIVE.match(t) or t.endswith("k") and t[:-1].isdigit()))
            if key:
                out.setdefault(key, [])
                if shape not in out[key]:
                    out[key].append(shape)
    return out


def _size_b(shape: ModelShape) -> float:
    return shape.param_count() / 1e9


def _in_order(key: tuple[str, ...], toks: tuple[str, ...]) -> bool:
    it = iter(toks)
    return all(any(t == k for t in it) for k in key)


def parse_model_name(name: str) -> ParsedName | None:
    toks = normalize_tokens(name)
    if not toks:
        return None
    families = _families()
    # the longest catalog family key whose tokens appear, in order, in the name
    best: tuple[str, ...] = ()
    for key in families:
        if len(key) > len(best) and _in_order(key, toks) and not all(_NUMBER.match(k) for k in key):
            best = key
    version = next((t for t in best if _NUMBER.match(t)), "")
    total, active = parse_size_tokens(toks, version)
    if total is None:
        return None
    members = families.get(best, [])
    label = " ".join(best) if best else ""
    size_txt = f"{total:g}B" + (f" ({active:g}B active)" if active else "")
    if members:
        nearest = min(members, key=lambda s: abs(math.log(_size_b(s) / total)))
        if abs(_size_b(nearest) / total - 1) <= NEAR:
            en = (f"'{name}' is in neither the catalog nor (reachable on) the Hub: read from its name as "
                  f"{label} {size_txt}, so the architecture of {nearest.hf_id or nearest.id} "
                  f"({_size_b(nearest):.2f}B) is assumed; paste its config.json for an exact count")
            zh = (f"“{name}”不在目录中，也无法从 Hub 读取：按名称判断为 {label} {size_txt}，假设其架构与 "
                  f"{nearest.hf_id or nearest.id}（{_size_b(nearest):.2f}B）相同；粘贴它的 config.json 可得到精确结果")
            shape = nearest.replace(id=name[:120], assumption=en, notes=en)
            return ParsedName(shape, label, total, active, nearest.id, {"en": en, "zh": zh})
    try:
        base = generic(total)
    except ShapeError:
        return None
    fam = f"a {label} model" if label else "a model"
    en = (f"'{name}' is in neither the catalog nor (reachable on) the Hub: read from its name as {fam} of "
          f"{size_txt}; {base.assumption}")
    zh = (f"“{name}”不在目录中，也无法从 Hub 读取：按名称判断为约 {size_txt} 的{label or ''}模型，按 Llama 类稠密结构"
          f"估算（{base.param_count() / 1e9:.2f}B 参数）；粘贴它的 config.json 可得到精确结果")
    if total and "x" in next((t for t in toks if _SIZE.match(t)), ""):
        en += " (a mixture of experts counted as a dense model of the same total size)"
        zh += "（混合专家模型按同等总参数量的稠密模型计）"
    shape = base.replace(id=name[:120], assumption=en, notes=en)
    return ParsedName(shape, label, total, active, "", {"en": en, "zh": zh})
