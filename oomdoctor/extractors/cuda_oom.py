"""Accelerator out-of-memory messages: every PyTorch wording, CUDA, HIP, XPU and MPS; TF, XLA and driver lines.

Logs pasted from terminals are often wrapped at a fixed width, mid-word
("GPU  has a to\\ntal capacity"). Each field is read from the text as it is and,
failing that, from the same window with its line breaks removed.
"""
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
    "oom.process_count", "oom.needed_gib", "oom.site",
}

_HEAD = re.compile(r"(?:CUDA|HIP|XPU) out of memory\.?\s{0,4}Tried to allocate\s{1,4}" + SIZE, re.IGNORECASE)
# Old wording (PyTorch <= 2.0): "(GPU 0; 23.69 GiB total capacity; 22.87 GiB already allocated;
# 3.06 MiB free; 23.25 GiB reserved in total by PyTorch)"; 1.x said "cached"; with a memory
# fraction set, "X allowed;" comes before the reserved figure.
_OLD = re.compile(
    r"\(GPU\s{0,2}(\d{1,3});\s{0,4}" + SIZE + r"\s{1,4}total capacity;\s{0,4}" + SIZE + r"\s{1,4}already allocated;"
    r"\s{0,4}(?:" + SIZE + r"\s{1,4}free;\s{0,4})?(?:\d{1,12}(?:\.\d{1,6})?\s{0,2}[KMGT]iB\s{1,4}allowed;\s{0,4})?"
    r"(?:" + SIZE + r"\s{1,4}(reserved in total by\s{1,4}PyTorch|cached))?",
    re.IGNORECASE,
)
# New wording (PyTorch >= 2.1; 2.1 spelled it "capacty"; the index is empty when the device is unknown).
_NEW_TOTAL = re.compile(
    r"GPU\s{0,2}(\d{1,3})?\s{0,2}has a total capac(?:i)?ty of\s{1,4}" + SIZE
    + r"(?:\s{1,4}of which\s{1,4}" + SIZE + r"\s{1,4}is free)?",
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
# XLA (JAX, PyTorch/XLA on TPU or GPU): "Ran out of memory in memory space hbm. Used 21.90G of 7.48G hbm."
# and "Attempting to reserve 10.51G at the bottom of memory. That was not possible. There are 8.97G free".
_XLA_USED = re.compile(r"Used\s{1,4}" + SIZE + r"\s{1,4}of\s{1,4}" + SIZE + r"\s{1,4}hbm", re.IGNORECASE)
_XLA_RESERVE = re.compile(r"Attempting to reserve\s{1,4}" + SIZE + r"\s{1,4}at the bottom of memory\.[^\n]{0,40}?"
                          r"There are\s{1,4}" + SIZE + r"\s{1,4}free", re.IGNORECASE)
# JAX/XLA on GPU: "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes."
_XLA_BYTES = re.compile(r"Out of memory while trying to allocate\s{1,4}(\d{1,15})\s{1,4}bytes", re.IGNORECASE)
# TensorFlow: "OOM when allocating tensor with shape[3,16,1024,1024] and type float".
_TF_SHAPE = re.compile(r"OOM when allocating tensor with shape\s{0,2}\[([\d, ]{1,80})\]\s{1,4}and type\s{1,4}(\w{1,12})")
_TF_BYTES = {"float": 4, "half": 2, "bfloat16": 2, "double": 8, "int32": 4, "int64": 8, "int8": 1, "uint8": 1,
             "bool": 1, "float16": 2, "float32": 4}
# The CUDA driver through TensorFlow: "failed to allocate 1.25G (1339080448 bytes) from device".
_DRIVER = re.compile(r"failed to alloc(?:ate)?\s{1,4}(?:[\d.]{1,12}[KMGT]?\s{1,4})?\(?(\d{1,15}) bytes\)?"
                     r"\s{1,4}(?:from device|on host)", re.IGNORECASE)

# A wrap at a blank turns the blank into a line break ("reserved in\ntotal by PyTorch"): the blanks inside the
# messages' phrases match any short run of white space, line breaks included (a wrap inside a word is undone
# by reading the window with its line breaks removed).
def _wrappable(pattern: re.Pattern) -> re.Pattern:
    return re.compile(pattern.pattern.replace(" ", r"\s{1,4}"), pattern.flags)


_HEAD, _OLD, _NEW_TOTAL, _THIS_PROCESS, _PROCESS, _ALLOCATED, _UNALLOCATED = (
    _wrappable(p) for p in (_HEAD, _OLD, _NEW_TOTAL, _THIS_PROCESS, _PROCESS, _ALLOCATED, _UNALLOCATED))

_WINDOW = 1200  # the parenthesis and the new-wording sentences follow the head within this span


# No device or request comes near an exbibyte: a larger figure is a mangled paste, not a size to reason with.
_MAX_GIB = 2.0 ** 30


def _gib(match: re.Match, group: int) -> float | None:
    return None if match.group(group) is None else to_gib(match.group(group), match.group(group + 1))


def _unwrapped(text: str) -> str:
    """The text with line breaks removed: undoes a fixed-width wrap that split words and numbers."""
    return text.replace("\r", "").replace("\n", "")


def _search(pattern: re.Pattern, text: str, unwrapped: str) -> tuple[re.Match | None, str]:
    match = pattern.search(text)
    if match:
        return match, text
    match = pattern.search(unwrapped)
    return match, unwrapped


def extract(text: str) -> Iterator[Finding]:
    mps = _MPS.search(text)
    if mps:
        detail = snippet(text, mps.start(), mps.end())
        yield from _possible({"oom.allocated_gib": Finding("oom.allocated_gib", _gib(mps, 1), detail),
                              "oom.total_gib": Finding("oom.total_gib", _gib(mps, 5), detail),
                              "oom.tried_gib": Finding("oom.tried_gib", _gib(mps, 7), detail)})
        return
    found: dict[str, Finding] = {}
    head, head_text = _search(_HEAD, text, _unwrapped(text))
    findings = _pytorch(head_text, head) if head else _other_stacks(text)
    for finding in findings:
        found.setdefault(finding.name, finding)
    # A log may hold several old-wording messages: the largest share used outside PyTorch among them.
    worst = _worst_outside(text)
    current = found.get("oom.outside_pytorch_gib")
    if worst is not None and (current is None or worst.value > current.value):
        found["oom.outside_pytorch_gib"] = worst
    yield from _possible(found)


def _possible(found: dict[str, Finding]) -> Iterator[Finding]:
    """The findings without sizes no device has (and without a ratio built on one)."""
    impossible = {name for name, f in found.items() if name.endswith("_gib") and isinstance(f.value, (int, float))
                  and f.value > _MAX_GIB}
    if impossible & {"oom.tried_gib", "oom.free_gib"}:
        impossible.add("oom.tried_over_free")
    return (f for name, f in found.items() if name not in impossible)


def _pytorch(text: str, head: re.Match) -> Iterator[Finding]:
    detail = snippet(text, head.start(), head.end())
    tried = to_gib(head.group(1), head.group(2))
    yield Finding("oom.tried_gib", tried, detail)
    window = text[head.end(): head.end() + _WINDOW]
    flat = _unwrapped(window)
    free = reserved = allocated = total = None
    old, old_text = _search(_OLD, window, flat)
    new, new_text = _search(_NEW_TOTAL, window, flat)
    if old is not None and new is not None:
        if old_text is new_text:
            use_old = old.start() < new.start()
        else:
            use_old = old_text is window  # what reads from the text as it is comes first
    else:
        use_old = old is not None
    if use_old:
        where = snippet(old_text, old.start(), old.end())
        allocated, free, cached = _gib(old, 4), _gib(old, 6), _gib(old, 8)
        total = _gib(old, 2)
        yield Finding("oom.wording", "old", where)
        yield Finding("oom.gpu_index", int(old.group(1)), where)
        yield Finding("oom.total_gib", total, where)
        yield Finding("gpu.memory_gib", total, where)
        yield Finding("oom.allocated_gib", allocated, where)
        if free is not None:
            yield Finding("oom.free_gib", free, where)
        if cached is not None:
            # PyTorch 1.0-1.3 printed as "cached" the cache beyond live tensors; what is reserved is never
            # less than what is allocated, so a smaller "cached" figure is that extra part.
            extra = old.group(10).lower() == "cached" and cached < allocated
            reserved = allocated + cached if extra else cached
            unallocated = cached if extra else max(reserved - allocated, 0.0)
            yield Finding("oom.reserved_gib", reserved, where)
            # The old wording has no "reserved but unallocated"; it is the difference (or the "cached" figure).
            yield Finding("oom.reserved_unallocated_gib", unallocated if extra else round(unallocated, 6), where)
            if reserved > 0:
                yield Finding("oom.fragmentation_ratio", round(unallocated / reserved, 4), where)
    elif new is not None:
        where = snippet(new_text, new.start(), new.end())
        total = _gib(new, 2)
        yield Finding("oom.wording", "new", where)
        if new.group(1) is not None:
            yield Finding("oom.gpu_index", int(new.group(1)), where)
        yield Finding("oom.total_gib", total, where)
        yield Finding("gpu.memory_gib", total, where)
        free = _gib(new, 4)
        if free is not None:
            yield Finding("oom.free_gib", free, where)
        rest = new_text[new.end():]
        rest_flat = _unwrapped(rest)
        this, this_text = _search(_THIS_PROCESS, rest, rest_flat)
        processes = [to_gib(m.group(2), m.group(3)) for m in _PROCESS.finditer(rest[:_WINDOW])]
        alloc, alloc_text = _search(_ALLOCATED, rest, rest_flat)
        if alloc:
            allocated = to_gib(alloc.group(1), alloc.group(2))
            yield Finding("oom.allocated_gib", allocated, snippet(alloc_text, alloc.start(), alloc.end()))
        unalloc, unalloc_text = _search(_UNALLOCATED, rest, rest_flat)
        if unalloc:
            unallocated = to_gib(unalloc.group(1), unalloc.group(2))
            yield Finding("oom.reserved_unallocated_gib", unallocated,
                          snippet(unalloc_text, unalloc.start(), unalloc.end()))
            if allocated is not None:
                reserved = allocated + unallocated
                if reserved > 0:
                    yield Finding("oom.fragmentation_ratio", round(unallocated / reserved, 4), "")
        if this:
            yield Finding("oom.process_in_use_gib", to_gib(this.group(1), this.group(2)),
                          snippet(this_text, this.start(), this.end()))
        yield from _processes(processes, this is not None, reserved)
    if total is not None and free is not None and reserved is not None:
        yield Finding("oom.outside_pytorch_gib", round(max(total - free - reserved, 0.0), 4), "total − free − reserved")
    if free is not None and free > 0:
        yield Finding("oom.tried_over_free", round(tried / free, 3), detail)
    elif free == 0:
        yield Finding("oom.tried_over_free", 1e6, detail)


def _processes(sizes: list[float], this_listed: bool, reserved: float | None) -> Iterator[Finding]:
    """Which listed process is this one, and how much the others hold.

    With "this process has X" every "Process N" line is another process. Without it
    (PyTorch 2.1) the trainer is among them: the smallest that holds at least what
    PyTorch reserved, or, without that figure, the largest.
    """
    count = len(sizes) + (1 if this_listed else 0)
    if count > 1:
        yield Finding("oom.process_count", count, f"{count} processes on the GPU")
    if not sizes:
        return
    if this_listed:
        others = list(sizes)
    else:
        if len(sizes) == 1:
            yield Finding("oom.process_in_use_gib", sizes[0], "the one process listed")
            return
        fitting = [s for s in sizes if reserved is not None and s >= reserved]
        mine = min(fitting) if fitting else max(sizes)
        others = list(sizes)
        others.remove(mine)
    yield Finding("oom.other_processes_gib", round(sum(others), 4), f"{len(others)} other process(es) listed")


def _worst_outside(text: str) -> Finding | None:
    worst = None
    for match in _OLD.finditer(text):
        total, allocated, free, cached = _gib(match, 2), _gib(match, 4), _gib(match, 6), _gib(match, 8)
        if free is None or cached is None:
            continue
        reserved = allocated + cached if match.group(10).lower() == "cached" and cached < allocated else cached
        outside = max(total - free - reserved, 0.0)
        if worst is None or outside > worst[0]:
            worst = (outside, snippet(text, match.start(), match.end()))
    return None if worst is None else Finding("oom.outside_pytorch_gib", round(worst[0], 4), worst[1])


def _other_stacks(text: str) -> Iterator[Finding]:
    used = _XLA_USED.search(text)
    if used:
        where = snippet(text, used.start(), used.end())
        yield Finding("oom.needed_gib", _gib(used, 1), where)
        yield Finding("oom.total_gib", _gib(used, 3), where)
        yield Finding("gpu.memory_gib", _gib(used, 3), where)
    reserve = _XLA_RESERVE.search(text)
    if reserve:
        where = snippet(text, reserve.start(), reserve.end())
        yield Finding("oom.tried_gib", _gib(reserve, 1), where)
        yield Finding("oom.free_gib", _gib(reserve, 3), where)
    xla_bytes = _XLA_BYTES.search(text)
    if xla_bytes:
        yield Finding("oom.tried_gib", round(int(xla_bytes.group(1)) / 2**30, 6),
                      snippet(text, xla_bytes.start(), xla_bytes.end()))
    shape = _TF_SHAPE.search(text)
    if shape:
        dims = [int(d) for d in re.findall(r"\d{1,9}", shape.group(1))]
        where = snippet(text, shape.start(), shape.end())
        size = _TF_BYTES.get(shape.group(2).lower())
        if dims and size:
            count = 1
            for d in dims:
                count *= d
            yield Finding("oom.tried_gib", round(count * size / 2**30, 6), where)
        # [batch, heads, len, len] is an attention score matrix; [batch, len, vocab] a logits tensor.
        if len(dims) >= 3 and dims[-1] == dims[-2] and dims[-1] >= 256:
            yield Finding("oom.site", "attention", where)
        elif len(dims) == 3 and dims[-1] >= 30000:
            yield Finding("oom.site", "logits", where)
    driver = _DRIVER.search(text)
    if driver:
        yield Finding("oom.tried_gib", round(int(driver.group(1)) / 2**30, 6), snippet(text, driver.start(), driver.end()))
