"""Sequence lengths said in words: "500k 的上下文长度", "32k窗口的上下文", "context len=2k", "8192ctx",
"a 16K context", "上下文长度为 4096". A "k" after a power of two is 1024 tokens, as windows are counted
(32k = 32768); after any other number it is a thousand (500k = 500000).

Config keys (cutoff_len, max_seq_length, ...) are read before this and win; two different lengths
said in words leave the length unknown.
"""
from __future__ import annotations

import re
from typing import Iterator

from . import Finding, snippet, unknown

NAME = "context_length"
PRODUCES = {"train.seq_len"}

_NUMBER = r"(\d{1,4}(?:\.\d{1,2})?|\d{5,7})[ \t]?([kK])?"
_PATTERNS = [
    # 500k 的上下文长度, 32k窗口的上下文, 8192ctx, 16K context, 4k token context
    re.compile(r"(?<![A-Za-z0-9_.])" + _NUMBER + r"[ \t]?(?:的|个)?[ \t]?(?:tokens?[ \t])?"
               r"(?:上下文|窗口|序列长度|长度|context(?![ \t]?(?:parallel|manager))|ctx\b|seq(?:uence)?[ \t]len(?:gth)?)",
               re.IGNORECASE),
    # context len=2k, context length of 4096, ctx 8192
    re.compile(r"\b(?:context|ctx)[ \t]?(?:len(?:gth)?|window|size)?[ \t]?(?:=|:|of|is)?[ \t]?" + _NUMBER + r"(?![\w.])",
               re.IGNORECASE),
    # 上下文长度为 4096, 序列长度设为8k
    re.compile(r"(?:上下文|序列)(?:长度|窗口)?[ \t]?(?:为|是|=|:|：|设为|设置为|开到)?[ \t]?" + _NUMBER + r"(?![\w.])"),
]
_MIN, _MAX = 16, 4_194_304


def thousands(number: float, k: bool) -> float:
    if not k:
        return number
    power_of_two = number >= 1 and number == int(number) and int(number) & (int(number) - 1) == 0
    return number * (1024 if power_of_two else 1000)


def extract(text: str) -> Iterator[Finding]:
    from .config_keys import _uncomment

    from .config_keys import distinct

    text = _uncomment(distinct(text))
    found: dict[int, str] = {}
    for pattern in _PATTERNS:
        for m in pattern.finditer(text):
            number = thousands(float(m.group(1)), bool(m.group(2)))
            if number != int(number) or not _MIN <= number <= _MAX:
                continue
            found.setdefault(int(number), snippet(text, m.start(), m.end()))
    if len(found) == 1:
        value, detail = next(iter(found.items()))
        yield Finding("train.seq_len", value, detail)
    elif len(found) > 1:
        yield Finding("train.seq_len", unknown(), "lengths said in words disagree: " + ", ".join(found.values())[:120])
