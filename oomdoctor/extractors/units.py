"""Memory sizes as logs print them, read into GiB (2**30 bytes)."""
from __future__ import annotations

import re

_FACTORS = {
    "b": 1, "bytes": 1, "byte": 1,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
    "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40,
    # PyTorch's MPS backend and some tools print GB/MB but mean binary units;
    # free -h prints "Gi"; a bare "G" in free/df output is binary as well.
    "kb": 2**10, "mb": 2**20, "gb": 2**30, "tb": 2**40,
    "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40,
}

SIZE = r"(\d{1,12}(?:\.\d{1,6})?)\s{0,2}(bytes|byte|[KMGT]iB|[KMGT]i|[KMGT]B|[KMGT]|B)\b"
SIZE_RE = re.compile(SIZE, re.IGNORECASE)


def to_gib(number: str, unit: str) -> float:
    return float(number) * _FACTORS[unit.lower()] / 2**30


def parse_size(text: str) -> float | None:
    match = SIZE_RE.fullmatch(text.strip())
    return to_gib(match.group(1), match.group(2)) if match else None
