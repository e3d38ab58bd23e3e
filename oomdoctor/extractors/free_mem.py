"""`free` output (with or without -h): total, used and available system RAM."""
from __future__ import annotations

import re
from typing import Iterator

from . import Finding, snippet
from .units import to_gib

NAME = "free"
PRODUCES = {"host.ram_total_gib", "host.ram_used_gib", "host.ram_available_gib", "host.shm_gib"}

_HEADER = re.compile(r"total\s{1,20}used\s{1,20}free\s{1,20}shared\s{1,20}buff/cache\s{1,20}available", re.IGNORECASE)
_NUM = r"(\d{1,15}(?:[.,]\d{1,4})?)([KMGT]i?|B)?"
_MEM = re.compile(r"^\s{0,4}Mem:\s{1,20}" + r"\s{1,20}".join([_NUM] * 6), re.MULTILINE)


def _size(number: str, unit: str | None) -> float:
    number = number.replace(",", ".")
    # Without -h, free prints kibibytes.
    return to_gib(number, unit) if unit else float(number) / 2**20


# df -h /dev/shm: "shm   64M   0   64M   0% /dev/shm" (Docker's default is 64 MiB)
_SHM = re.compile(r"^\S{1,40}\s{1,20}(\d{1,9}(?:\.\d{1,3})?)([KMGT])i?\s{1,20}\S{1,12}\s{1,20}\S{1,12}\s{1,20}\d{1,3}%\s{1,20}/dev/shm\s{0,4}$", re.MULTILINE)


def extract(text: str) -> Iterator[Finding]:
    shm = _SHM.search(text)
    if shm:
        yield Finding("host.shm_gib", round(to_gib(shm.group(1), shm.group(2)), 4), snippet(text, shm.start(), shm.end()))
    if not _HEADER.search(text):
        return
    mem = _MEM.search(text)
    if not mem:
        return
    detail = snippet(text, mem.start(), mem.end())
    groups = mem.groups()
    total, used, available = (_size(groups[i], groups[i + 1]) for i in (0, 2, 10))
    yield Finding("host.ram_total_gib", round(total, 3), detail)
    yield Finding("host.ram_used_gib", round(used, 3), detail)
    yield Finding("host.ram_available_gib", round(available, 3), detail)
