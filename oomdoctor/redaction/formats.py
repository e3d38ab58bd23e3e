"""Provider token formats (knowledge/secrets.yaml): what they look like and what each kind is called."""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterator

from .. import yaml_safe
from .keys import looks_random

SECRETS_FILE = Path(__file__).resolve().parents[2] / "knowledge" / "secrets.yaml"

_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
# `left: "[0-9]{5,16}"`: one character class and a count, read backwards from the prefix.
_LEFT = re.compile(r"\[([^\]]{1,40})\]\{(\d{1,3})(?:,(\d{1,3}))?\}")


@dataclass(frozen=True)
class Format:
    kind: str
    prefix: str
    regex: re.Pattern
    random: bool
    left_class: re.Pattern | None
    left_min: int
    source: str

    def find(self, text: str) -> Iterator[tuple[int, int]]:
        """Where tokens of this format stand in `text`, as (start, end)."""
        for match in self.regex.finditer(text):
            start, end = match.span()
            if self.left_class is not None:
                # The class read backwards from the prefix, as a reversed slice: bounded by the count.
                width = self.left_class.match(text[max(0, start - 64):start][::-1])
                if width is None or width.end() < self.left_min:
                    continue
                start -= width.end()
                if not _edge(text, start):
                    continue
            if self.random and not looks_random(text[start + len(self.prefix):end], 12):
                continue
            yield start, end


def _edge(text: str, start: int) -> bool:
    """A token starts at a word's edge, or right after a literal escape (`\\n`) in a quoted string."""
    if start == 0 or text[start - 1] not in _ALNUM:
        return True
    return start >= 2 and text[start - 2] == "\\" and text[start - 1] in "nrt"


@dataclass(frozen=True)
class Catalog:
    formats: tuple[Format, ...]
    labels: dict[str, dict[str, str]]     # kind -> {en, zh}
    key_words: dict[str, str]             # a word in a key's name -> the provider's kind


def _compile(entry: dict) -> Format:
    prefix = entry["prefix"]
    literal = re.escape(prefix)
    # The left edge, checked right after the prefix (so the scan still looks for the prefix
    # first): not inside a longer word, or right after a literal escape (`\n`) in a quoted string.
    edge = "" if "left" in entry else f"(?:(?<![A-Za-z0-9]{literal})|(?<=\\\\[nrt]{literal}))"
    # The right edge: the token's alphabet does not go on.
    regex = re.compile(literal + edge + "(?:" + entry["regex"] + ")(?![A-Za-z0-9_])")
    left_class, left_min = None, 0
    if "left" in entry:
        spec = _LEFT.fullmatch(entry["left"])
        if spec is None:
            raise ValueError(f"secrets.yaml: 'left' must be one class and a count, not {entry['left']!r}")
        low, high = int(spec.group(2)), int(spec.group(3) or spec.group(2))
        left_class, left_min = re.compile(f"[{spec.group(1)}]{{0,{high}}}"), low
    return Format(entry["kind"], prefix, regex, bool(entry.get("random")), left_class, left_min,
                  entry.get("source", ""))


@lru_cache(maxsize=1)
def catalog(path: Path = SECRETS_FILE) -> Catalog:
    raw = yaml_safe.load(path.read_text(encoding="utf-8"))
    kinds = raw["kinds"]
    formats = tuple(_compile(entry) for entry in raw["formats"])
    unknown = sorted({f.kind for f in formats} - set(kinds))
    if unknown:
        raise ValueError(f"secrets.yaml: formats name kinds without a label: {unknown}")
    labels = {kind: {"en": entry["en"], "zh": entry["zh"]} for kind, entry in kinds.items()}
    key_words = {word: kind for kind, entry in kinds.items() for word in entry.get("keys", ())}
    return Catalog(formats, labels, key_words)
