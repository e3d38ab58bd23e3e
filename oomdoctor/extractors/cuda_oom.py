"""Accelerator out-of-memory messages: every PyTorch wording, CUDA, HIP, XPU and MPS."""
from __future__ import annotations

import re
from typing import Iterator

from . import Finding, snippet
from .units import SIZE, to_gib

NAME = "accelerator_oom_message"
PRODUCES = {
    "oom.tried_gib", "oom.gpu_index", "oom.total_gib", "oom.free_gib", "oom.allocated_gib", "oom.reserved_gib",
    "oom.reserved_unallocated_gib", "oom.process_in_use_gib", "oom.other_processes_gib", "oom.wording",
    "oom.fragmentation_ratio", "oom.tried_over_free", "gpu.memory_gib", "oom.outside_pytorch_gib",
}

_HEAD = re.compile(r"(?:CUDA|HIP|XPU) out of memory\.?\s{0,4}Tried to allocate\s{1,4}" + SIZE, re.IGNORECASE)
# Old wording (PyTorch <= 2.0): "(GPU 0; 23.69 GiB total capacity; 22.87 GiB already allocated;
# 3.06 MiB free; 23.25 GiB reserved in total by PyTorch)"; 1.x said "cached" for reserved.
_OLD = re.compile(
    r"\(GPU\s{0,2}(\d{1,3});\s{0,4}" + SIZE + r"\s{1,4}total capacity;\s{0,4}" + SIZE + r"\s{1,4}already allocated;"
    r"\s{0,4}(?:" + SIZE + r"\s{1,4}free;\s{0,4})?(?:" + SIZE + r"\s{1,4}(?:reserved in total by PyTorch|cached))?",
    re.IGNORECASE,
)
# New wording (PyTorch >= 2.1; 2.1 spelled it "capacty").
_NEW_TOTAL = re.compile(
    r"GPU\s{0,2}(\d{1,3}) has a total capac(?:i)?ty of\s{1,4}" + SIZE + r"(?:\s{1,4}of which\s{1,4}" + SIZE + r"\s{1,4}is free)?",
    re.IGNORECASE,
)
_THIS_PROCESS = re.compile(r"this process has\s{1,4}" + SIZE + r"\s{1,4}memory in use", re.IGNORECASE)
_PROCESS = re.compile(r"Process\s{1,4}(\d{1,10})\s{1,4}has\s{1,4}" + SIZE + r"\s{1,4}memory in use", re.IGNORECASE)
_ALLOCATED = re.compile(r"Of the allocated memory\s{1,4}" + SIZE + r"\s{1,4}is allocated by PyTorch", re.IGNORECASE)
_UNALLOCATED = re.compile(SIZE + r"\s{1,4}is reserved by PyTorch but unallocated", re.IGNORECASE)
# MPS: "MPS backend out of memory (MPS allocated: 17.79 GB, other allocations: 326.91 MB,
# max allowed: 18.13 GB). Tried to allocate 64.00 MB on private pool."
_MPS = re.compile(
    r"MPS backend out of memory \(MPS allocated:\s{0,2}" + SIZE + r",\s{0,2}other allocations:\s{0,2}" + SIZE
    + r",\s{0,2}max allowed:\s{0,2}" + SIZE + r"\)\.?\s{0,4}Tried to allocate\s{1,4}" + SIZE,
    re.IGNORECASE,
)

_WINDOW = 1200  # the parenthesis and the new-wording sentences follow the head within this span


def _gib(match: re.Match, group: int) -> float | None:
    return None if match.group(group) is None else to_gib(match.group(group), match.group(group + 1))


def extract(text: str) -> Iterator[Finding]:
    mps = _MPS.search(text)
    if mps:
        detail = snippet(text, mps.start(), mps.end())
        yield Finding("oom.allocated_gib", _gib(mps, 1), detail)
        yield Finding("oom.total_gib", _gib(mps, 5), detail)
        yield Finding("oom.tried_gib", _gib(mps, 7), detail)
        return
    head = _HEAD.search(text)
    if not head:
        return
    detail = snippet(text, head.start(), head.end())
    tried = to_gib(head.group(1), head.group(2))
    yield Finding("oom.tried_gib", tried, detail)
    window = text[head.end(): head.end() + _WINDOW]
    free = reserved = allocated = unallocated = None
    old = _OLD.search(window)
    new = _NEW_TOTAL.search(window)
    if old and (not new or old.start() < new.start()):
        where = snippet(window, old.start(), old.end())
        allocated, free, reserved = _gib(old, 4), _gib(old, 6), _gib(old, 8)
        yield Finding("oom.wording", "old", where)
        yield Finding("oom.gpu_index", int(old.group(1)), where)
        yield Finding("oom.total_gib", _gib(old, 2), where)
        yield Finding("gpu.memory_gib", _gib(old, 2), where)
        yield Finding("oom.allocated_gib", allocated, where)
        if free is not None:
            yield Finding("oom.free_gib", free, where)
        if reserved is not None:
            yield Finding("oom.reserved_gib", reserved, where)
            # The old wording has no "reserved but unallocated"; it is the difference.
            unallocated = max(reserved - allocated, 0.0)
            yield Finding("oom.reserved_unallocated_gib", round(unallocated, 6), where)
            if reserved > 0:
                yield Finding("oom.fragmentation_ratio", round(unallocated / reserved, 4), where)
    elif new:
        where = snippet(window, new.start(), new.end())
        yield Finding("oom.wording", "new", where)
        yield Finding("oom.gpu_index", int(new.group(1)), where)
        yield Finding("oom.total_gib", _gib(new, 2), where)
        yield Finding("gpu.memory_gib", _gib(new, 2), where)
        free = _gib(new, 4)
        if free is not None:
            yield Finding("oom.free_gib", free, where)
        rest = window[new.end():]
        this = _THIS_PROCESS.search(rest)
        processes = [(m.group(1), to_gib(m.group(2), m.group(3))) for m in _PROCESS.finditer(rest[:_WINDOW])]
        if this:
            yield Finding("oom.process_in_use_gib", to_gib(this.group(1), this.group(2)), snippet(rest, this.start(), this.end()))
        elif len(processes) == 1:
            yield Finding("oom.process_in_use_gib", processes[0][1], f"Process {processes[0][0]}")
        if len(processes) > 1:
            # With NVML PyTorch lists every process on the GPU; the largest is taken to be the trainer.
            sizes = sorted(size for _, size in processes)
            yield Finding("oom.other_processes_gib", round(sum(sizes[:-1]), 4), f"{len(processes)} processes listed")
        alloc = _ALLOCATED.search(rest)
        if alloc:
            allocated = to_gib(alloc.group(1), alloc.group(2))
            yield Finding("oom.allocated_gib", allocated, snippet(rest, alloc.start(), alloc.end()))
        unalloc = _UNALLOCATED.search(rest)
        if unalloc:
            unallocated = to_gib(unalloc.group(1), unalloc.group(2))
            yield Finding("oom.reserved_unallocated_gib", unallocated, snippet(rest, unalloc.start(), unalloc.end()))
            if allocated is not None:
                reserved = allocated + unallocated
                if reserved > 0:
                    yield Finding("oom.fragmentation_ratio", round(unallocated / reserved, 4), "")
    total = _gib(old, 2) if old and (not new or old.start() < new.start()) else (_gib(new, 2) if new else None)
    if total is not None and free is not None and reserved is not None:
        yield Finding("oom.outside_pytorch_gib", round(max(total - free - reserved, 0.0), 4), "total − free − reserved")
    if free is not None and free > 0:
        yield Finding("oom.tried_over_free", round(tried / free, 3), detail)
    elif free == 0:
        yield Finding("oom.tried_over_free", 1e6, detail)
