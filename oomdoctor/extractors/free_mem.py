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


# The unit of free's bare numbers is its flag's: -b bytes, -k KiB (the default), -m MiB, -g GiB, -t TiB (procps:
# binary unless --si; --kilo, --mega, --giga and --tera are decimal and imply it, so they settle nothing here).
_FLAG = re.compile(r"(?<![\w-])free(?:[ \t]{1,4}-{1,2}[\w-]{1,12}){0,4}?[ \t]{1,4}(?:-([bkmgt])[a-z]{0,3}|--(bytes|kibi|mebi|gibi|tebi))\b")
_SI = re.compile(r"(?<![\w-])free(?:[ \t]{1,4}-{1,2}[\w-]{1,12}){0,5}?[ \t]{1,4}--(?:si|kilo|mega|giga|tera)\b")
_LONG = {"bytes": "b", "kibi": "k", "mebi": "m", "gibi": "g", "tebi": "t"}
_BARE_UNIT = {"b": "B", "k": "K", "m": "M", "g": "G", "t": "T"}
# Without a visible flag bare numbers are KiB, the default, only where they look it: a machine of 1 GiB or more.
_MIN_KIB = 2**20


def _bare_unit(text: str, total: str) -> str | None:
    """The unit free printed its bare numbers in, or None when the paste does not settle it."""
    if _SI.search(text):
        return None
    flags = {m.group(1) or _LONG[m.group(2)] for m in _FLAG.finditer(text)}
    if len(flags) == 1:
        return _BARE_UNIT[flags.pop()]
    if not flags and float(total.replace(",", ".")) >= _MIN_KIB:
        return "K"
    return None


def _size(number: str, unit: str | None) -> float:
    return to_gib(number.replace(",", "."), unit)


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
    groups = list(mem.groups())
    if not all(groups[i + 1] for i in (0, 2, 10)):
        bare = _bare_unit(text, groups[0])
        if bare is None:
            return  # "Mem: 125 121 ..." from free -g or from a tiny machine: the unit is not in the paste
        for i in (0, 2, 10):
            groups[i + 1] = groups[i + 1] or bare
    total, used, available = (_size(groups[i], groups[i + 1]) for i in (0, 2, 10))
    yield Finding("host.ram_total_gib", round(total, 3), detail)
    yield Finding("host.ram_used_gib", round(used, 3), detail)
    yield Finding("host.ram_available_gib", round(available, 3), detail)
