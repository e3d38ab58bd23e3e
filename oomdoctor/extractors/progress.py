"""Progress bars and rank prefixes: did training run before it failed, and on how many ranks."""
from __future__ import annotations

import re
from typing import Iterator

from . import Finding, snippet

NAME = "progress"
PRODUCES = {"log.after_steps", "log.rank_count"}

# tqdm: " 12%|█▏        | 150/1250 [03:10<23:16,  1.27s/it]"
_TQDM = re.compile(r"\|\s{0,4}(\d{1,9})/(\d{1,9})\s{0,2}\[")
_RANK = re.compile(r"\[(?:rank|Rank|RANK)\s{0,2}(\d{1,5})\]|\brank(\d{1,5})\]?:|\[default(\d{1,5})\]:")


def extract(text: str) -> Iterator[Finding]:
    steps = [(int(m.group(1)), m) for m in _TQDM.finditer(text)]
    if steps:
        done, match = max(steps, key=lambda s: s[0])
        yield Finding("log.after_steps", done > 1, snippet(text, match.start(), match.end()))
    ranks = {next(g for g in m.groups() if g is not None) for m in _RANK.finditer(text)}
    if len(ranks) > 1:
        yield Finding("log.rank_count", len(ranks), f"ranks {sorted(ranks, key=int)[:8]}")
