"""What a model is called: the canonical tokens of the names people give it.

Lower-case, organisation prefix dropped, quantisation/format tags and words like
instruct/chat/hf/base removed, letters and numbers split ("llama3" -> "llama 3",
"qwen2.5" -> "qwen 2.5") while size tokens stay whole ("7b", "0.5b", "8x7b",
"a3b").  The catalog checks its aliases with these keys and ``fuzzy`` resolves
names against them; this module knows no catalog.

Everything is linear in the input length; the regular expressions have no nested
quantifiers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

from .shape import ModelShape

__all__ = ["NOISE", "SUFFIX_NOISE", "SIZE_RE", "SIZE_WORDS", "VARIANT_WORDS", "VERSION_RE", "Token", "alias_keys", "blank_format_tags",
           "canonical", "normalize_tokens", "tokens_with_spans"]

# Chinese names people use for these families (mapped to Latin tokens).
_CJK_WORDS: tuple[tuple[str, str], ...] = (
    ("书生·浦语", "internlm"), ("书生浦语", "internlm"), ("浦语", "internlm"),
    ("通义千问", "qwen"), ("千问", "qwen"), ("百川", "baichuan"),
    ("深度求索", "deepseek"), ("羊驼", "llama"), ("蒸馏", "distill"), ("猎鹰", "falcon"),
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
SUFFIX_NOISE = frozenset({"instruct", "chat", "hf", "base", "it", "pt", "sft", "dpo", "rlhf"})
# Sizes some families give in words (gpt2-large, t5-xl): a name that goes on with one is a sibling of the alias
# it starts with, another model.
SIZE_WORDS = frozenset({"small", "medium", "large", "xl", "xxl"})
# Words that make another model of a family (GLM-4.5-Air, Command R+ "plus", Qwen2.5-VL, Qwen2.5-Coder): a name
# with one is never read as a catalog model whose aliases lack it, nor the reverse.
VARIANT_WORDS = SIZE_WORDS | frozenset({"air", "plus", "vl", "vision", "coder", "math", "omni", "audio", "guard",
                                        "flash", "lite", "turbo", "pro", "max", "nano", "mini", "next",
                                        # T5's relatives: Flan-T5 (T5 v1.1's gated feed-forward), mT5/umT5 and ByT5
                                        # (250k- and byte-vocabularies) are other models than t5-small of one size
                                        "flan", "mt", "umt", "byt"})
SIZE_RE = re.compile(r"^(?:\d+x)?\d+(?:\.\d+)?[bm]$|^a\d+(?:\.\d+)?b$")
VERSION_RE = re.compile(r"^\d+(?:\.\d+)*$")


@dataclass(frozen=True)
class Token:
    text: str
    start: int
    end: int


def tokens_with_spans(text: str) -> list[Token]:
    """Tokens of ``text`` with character spans, CJK family names mapped, noise kept."""
    low = text.lower()
    low = low.replace("_", " ")  # internlm2_5 -> internlm2 5 handled below
    toks: list[Token] = []
    for m in _TOKEN_RE.finditer(low):
        toks.append(Token(m.group(0), m.start(), m.end()))
    for m in _CJK_RE.finditer(text):
        mapped = _CJK_MAP[m.group(0)]
        if mapped:
            toks.append(Token(mapped, m.start(), m.end()))
    toks.sort(key=lambda t: t.start)
    # "internlm2_5" / "internlm2 5": a version digit followed by a lone digit joined by "_" -> "2.5"
    merged: list[Token] = []
    for t in toks:
        if (merged and VERSION_RE.match(t.text) and VERSION_RE.match(merged[-1].text)
                and text[merged[-1].end:t.start] == "_" and "." not in merged[-1].text):
            prev = merged.pop()
            merged.append(Token(f"{prev.text}.{t.text}", prev.start, t.end))
        else:
            merged.append(t)
    return merged


def blank_format_tags(text: str) -> str:
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
    return tuple(t.text for t in tokens_with_spans(blank_format_tags(s)) if t.text not in NOISE)


def canonical(name: str) -> str:
    return " ".join(normalize_tokens(name))


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
