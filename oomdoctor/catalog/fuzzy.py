"""Resolve what people type ("llama3-8b-instruct", "qwen2.5 7b", "通义千问2.5-7B") to catalog models.

Names are compared as canonical tokens (``names``).  Exact token matches win; a
fuzzy match is only accepted among aliases whose size tokens, version numbers and
variant words are identical to the query's, so 7b never becomes 70b or 72b, 8x7b
never 7b, Llama 3.1 never 3.2, and Qwen2.5-VL-7B never Qwen2.5-7B.

Everything is linear in the input length; the regular expressions have no nested
quantifiers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from rapidfuzz import fuzz, process

from .models import load_models
from .names import (NOISE, SIZE_RE, SUFFIX_NOISE, VARIANT_WORDS, VERSION_RE, alias_keys, blank_format_tags,
                    normalize_tokens, tokens_with_spans)
from .shape import ModelShape

__all__ = [
    "resolve_model",
    "find_models_in_text",
    "ModelMention",
    "MATCH_THRESHOLD",
]

MATCH_THRESHOLD = 85.0
MAX_WINDOW = 8


def _signature(tokens: Iterable[str]) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    tokens = tuple(tokens)
    sizes = frozenset(t for t in tokens if SIZE_RE.match(t))
    versions = frozenset(t for t in tokens if VERSION_RE.match(t))
    variants = frozenset(t for t in tokens if t in VARIANT_WORDS)
    return sizes, versions, variants


class _Index:
    def __init__(self, shapes: Iterable[ModelShape]):
        self.exact: dict[tuple[str, ...], tuple[ModelShape, str]] = {}
        self.by_sig: dict[tuple[frozenset[str], ...], list[tuple[str, ModelShape, str]]] = {}
        for shape in shapes:
            for alias, key in alias_keys(shape):
                self.exact.setdefault(key, (shape, alias))
                self.by_sig.setdefault(_signature(key), []).append((" ".join(key), shape, alias))


_INDEX_CACHE: dict[tuple[int, ...], _Index] = {}


def _index(models: dict[str, ModelShape] | None) -> _Index:
    if models is None:
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
    ``MATCH_THRESHOLD`` (and the same variant words: Qwen2.5-VL-7B is not Qwen2.5-7B); as a last resort a model mentioned inside the text (a
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
    toks = tokens_with_spans(blank_format_tags(text))
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
        after = i + width
        sep = text[end:toks[after].start] if after < n else " "
        if (sep in ("-", "_") and toks[after].text in VARIANT_WORDS) or (
                sep in ("-", "_", "") and SIZE_RE.match(toks[after].text)
                and not any(SIZE_RE.match(t.text) for t in toks[i:after])):
            # "gpt2-large", "GLM-4.5-Air", "bloom-7b1" name a sibling of gpt2 / GLM-4.5 / BLOOM, not the model
            i = after + 1
            continue
        if i > 0 and toks[i - 1].text in VARIANT_WORDS and text[toks[i - 1].end:start] in ("-", "_", ""):
            # so do "flan-t5-small", "mt5-small": a variant word joined in front makes another model of t5-small
            i = after
            continue
        # extend over trailing noise such as -Instruct / -hf so the reported text is the whole name
        j = i + width
        while j < n and toks[j].text in SUFFIX_NOISE and text[end:toks[j].start] in ("-", "_", "."):
            end = toks[j].end
            j += 1
        out.append(ModelMention(shape, text[start:end], start, end, alias))
        i = j
    return out
