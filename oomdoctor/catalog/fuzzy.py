"""Resolve what people type ("llama3-8b-instruct", "qwen2.5 7b", "通义千问2.5-7B") to catalog models.

Names are normalised into tokens: lower-case, organisation prefix dropped,
quantisation/format tags and words like instruct/chat/hf/base removed, letters
and numbers split ("llama3" -> "llama 3", "qwen2.5" -> "qwen 2.5") while size
tokens stay whole ("7b", "0.5b", "8x7b", "a3b").  Exact token matches win; a
fuzzy match is only accepted among aliases whose size tokens *and* version
numbers are identical to the query's, so 7b never becomes 70b or 72b, 8x7b never
7b, and Llama 3.1 never 3.2.

Everything is linear in the input length; the regular expressions have no nested
quantifiers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Iterator

from rapidfuzz import fuzz, process

from .shape import ModelShape

__all__ = [
    "normalize_tokens",
    "canonical",
    "alias_keys",
    "resolve_model",
    "find_models_in_text",
    "ModelMention",
    "MATCH_THRESHOLD",
]

MATCH_THRESHOLD = 85.0
MAX_WINDOW = 8

# Chinese names people use for these families (mapped to Latin tokens).
_CJK_WORDS: tuple[tuple[str, str], ...] = (
    ("书生·浦语", "internlm"), ("书生浦语", "internlm"), ("浦语", "internlm"),
    ("通义千问", "qwen"), ("千问", "qwen"), ("百川", "baichuan"),
    ("深度求索", "deepseek"), ("羊驼", "llama"), ("蒸馏", "distill"),
    ("零一万物", ""), ("智谱", ""),
)
_CJK_RE = re.compile("|".join(re.escape(w) for w, _ in _CJK_WORDS))
_CJK_MAP = dict(_CJK_WORDS)

# Tags that say nothing about the architecture.
_QUANT_RE = re.compile(
    r"(?<![a-z0-9])(?:\d+[-_ ]?bits?|int[48]|fp(?:4|8|16|32)|bf16|nf4|gguf|awq|gptq|bnb|exl2|mlx|onnx|"
    r"q[2-8]_k(?:_[msl])?|q[48]_[01])(?![a-z0-9])"
)
_TOKEN_RE = re.compile(
    r"\d+x\d+(?:\.\d+)?b(?![a-z])"      # 8x7b
    r"|a\d+(?:\.\d+)?b(?![a-z])"         # a3b, a2.7b (active params)
    r"|\d+(?:\.\d+)?[bm](?![a-z])"       # 7b, 0.5b, 500m
    r"|\d+k(?![a-z])"                    # 4k, 128k (context length)
    r"|\d+(?:\.\d+)*"                    # versions: 2, 2.5, 3.1, 2407
    r"|[a-z]+"
)
NOISE = frozenset({
    "meta", "instruct", "chat", "hf", "base", "it", "pt", "v", "model", "models", "sft", "dpo", "rlhf",
    "bit", "bits", "unsloth", "mlx", "community", "the", "and", "a", "an", "of", "for", "with",
    "safetensors", "pytorch", "torch", "quantized", "merged", "full", "weights",
})
_SUFFIX_NOISE = frozenset({"instruct", "chat", "hf", "base", "it", "pt", "sft", "dpo", "rlhf"})
_SIZE_RE = re.compile(r"^(?:\d+x)?\d+(?:\.\d+)?[bm]$|^a\d+(?:\.\d+)?b$")
_VERSION_RE = re.compile(r"^\d+(?:\.\d+)*$")


@dataclass(frozen=True)
class _Tok:
    text: str
    start: int
    end: int


def _tokens_with_spans(text: str) -> list[_Tok]:
    """Tokens of ``text`` with character spans, CJK family names mapped, noise kept."""
    low = text.lower()
    low = low.replace("_", " ")  # internlm2_5 -> internlm2 5 handled below
    toks: list[_Tok] = []
    for m in _TOKEN_RE.finditer(low):
        toks.append(_Tok(m.group(0), m.start(), m.end()))
    for m in _CJK_RE.finditer(text):
        mapped = _CJK_MAP[m.group(0)]
        if mapped:
            toks.append(_Tok(mapped, m.start(), m.end()))
    toks.sort(key=lambda t: t.start)
    # "internlm2_5" / "internlm2 5": a version digit followed by a lone digit joined by "_" -> "2.5"
    merged: list[_Tok] = []
    for t in toks:
        if (merged and _VERSION_RE.match(t.text) and _VERSION_RE.match(merged[-1].text)
                and text[merged[-1].end:t.start] == "_" and "." not in merged[-1].text):
            prev = merged.pop()
            merged.append(_Tok(f"{prev.text}.{t.text}", prev.start, t.end))
        else:
            merged.append(t)
    return merged


def _blank_quant(text: str) -> str:
    """Lower-case ``text`` with quantisation/format tags replaced by spaces (same length)."""
    low = text.lower()
    blanked = _QUANT_RE.sub(lambda m: " " * len(m.group(0)), low)
    return blanked if len(blanked) == len(text) else text


def normalize_tokens(name: str) -> tuple[str, ...]:
    """Canonical tokens of a model name (organisation prefix and noise removed)."""
    if not isinstance(name, str):
        return ()
    s = name.strip()
    if "/" in s:
        s = s.rstrip("/").rsplit("/", 1)[-1]
    return tuple(t.text for t in _tokens_with_spans(_blank_quant(s)) if t.text not in NOISE)


def canonical(name: str) -> str:
    return " ".join(normalize_tokens(name))


def _signature(tokens: Iterable[str]) -> tuple[frozenset[str], frozenset[str]]:
    sizes = frozenset(t for t in tokens if _SIZE_RE.match(t))
    versions = frozenset(t for t in tokens if _VERSION_RE.match(t))
    return sizes, versions


def alias_keys(shape: ModelShape) -> Iterator[tuple[str, tuple[str, ...]]]:
    """(alias as written, canonical tokens) for every name a shape is known by."""
    seen: set[tuple[str, ...]] = set()
    for alias in (shape.id, shape.hf_id, *shape.names):
        if not alias:
            continue
        key = normalize_tokens(alias)
        if key and key not in seen:
            seen.add(key)
            yield alias, key


class _Index:
    def __init__(self, shapes: Iterable[ModelShape]):
        self.exact: dict[tuple[str, ...], tuple[ModelShape, str]] = {}
        self.by_sig: dict[tuple[frozenset[str], frozenset[str]], list[tuple[str, ModelShape, str]]] = {}
        for shape in shapes:
            for alias, key in alias_keys(shape):
                self.exact.setdefault(key, (shape, alias))
                self.by_sig.setdefault(_signature(key), []).append((" ".join(key), shape, alias))


_INDEX_CACHE: dict[tuple[int, ...], _Index] = {}


def _index(models: dict[str, ModelShape] | None) -> _Index:
    if models is None:
        from .models import load_models

        models = load_models()
    ident = tuple(id(s) for s in models.values())
    cached = _INDEX_CACHE.get(ident)
    if cached is None:
        cached = _Index(models.values())
        if len(_INDEX_CACHE) > 16:
            _INDEX_CACHE.clear()
        _INDEX_CACHE[ident] = cached
    return cached


def resolve_model(text: str, models: dict[str, ModelShape] | None = None
                  ) -> tuple[ModelShape | None, float, str]:
    """``(shape, score 0-100, matched alias)``; ``(None, best score, "")`` when nothing fits.

    Exact normalised matches score 100.  Otherwise the best fuzzy match among
    aliases with the same size and version tokens is accepted at
    ``MATCH_THRESHOLD``; as a last resort a model mentioned inside the text (a
    log line, a ``from_pretrained(...)`` call) is returned.
    """
    if not isinstance(text, str) or not text.strip():
        return None, 0.0, ""
    idx = _index(models)
    key = normalize_tokens(text)
    if key in idx.exact:
        shape, alias = idx.exact[key]
        return shape, 100.0, alias
    best_score = 0.0
    if key:
        group = idx.by_sig.get(_signature(key), [])
        if group:
            query = " ".join(key)
            hit = process.extractOne(query, [g[0] for g in group], scorer=fuzz.ratio)
            if hit is not None:
                _, score, pos = hit
                best_score = float(score)
                if score >= MATCH_THRESHOLD:
                    _, shape, alias = group[pos]
                    return shape, float(score), alias
    mentions = find_models_in_text(text, models)
    if mentions:
        m = mentions[0]
        return m.shape, 95.0, m.alias
    return None, best_score, ""


@dataclass(frozen=True)
class ModelMention:
    shape: ModelShape
    text: str      # the substring of the input that named the model
    start: int
    end: int
    alias: str     # catalog alias it matched


def find_models_in_text(text: str, models: dict[str, ModelShape] | None = None) -> list[ModelMention]:
    """Every catalog model named inside free text, in order of appearance.

    Scans token windows (longest first, at most ``MAX_WINDOW`` tokens) and looks
    each up in the exact alias index: O(len(text)).
    """
    if not isinstance(text, str) or not text:
        return []
    idx = _index(models)
    # quantisation tags blanked in place (same length) so spans stay valid
    toks = _tokens_with_spans(_blank_quant(text))
    n = len(toks)
    out: list[ModelMention] = []
    i = 0
    while i < n:
        if toks[i].text in NOISE:
            i += 1
            continue
        found = None
        for width in range(min(MAX_WINDOW, n - i), 0, -1):
            window = toks[i:i + width]
            if window[-1].text in NOISE:
                continue
            key = tuple(t.text for t in window if t.text not in NOISE)
            hit = idx.exact.get(key)
            if hit is not None:
                found = (width, hit)
                break
        if found is None:
            i += 1
            continue
        width, (shape, alias) = found
        start, end = toks[i].start, toks[i + width - 1].end
        # extend over trailing noise such as -Instruct / -hf so the reported text is the whole name
        j = i + width
        while j < n and toks[j].text in _SUFFIX_NOISE and text[end:toks[j].start] in ("-", "_", "."):
            end = toks[j].end
            j += 1
        out.append(ModelMention(shape, text[start:end], start, end, alias))
        i = j
    return out
