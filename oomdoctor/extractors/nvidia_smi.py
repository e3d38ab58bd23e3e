"""nvidia-smi tables: memory used and total per GPU, the card's name, the processes."""
from __future__ import annotations

import re
from typing import Iterator

from . import Finding, snippet

NAME = "nvidia_smi"
PRODUCES = {"smi.memory_used_gib", "smi.memory_total_gib", "smi.used_ratio", "smi.gpu_count", "smi.process_count",
            "smi.used_spread_gib", "gpu.name", "gpu.memory_gib"}

_USAGE = re.compile(r"\|\s{0,40}(\d{1,7})MiB\s{0,4}/\s{0,4}(\d{1,7})MiB\s{0,40}\|")
_NAME = re.compile(r"^\|\s{0,6}\d{1,2}\s{1,6}((?:NVIDIA|Tesla|Quadro|GeForce)[^|]{0,60}?)\s{1,20}(?:On|Off)\s{0,6}\|", re.MULTILINE)
_PROCESS = re.compile(r"^\|\s{0,6}\d{1,2}\s{1,12}(?:N/A|\d{1,6})\s{1,12}(?:N/A|\d{1,6})\s{1,12}\d{1,10}\s{1,8}[CG](?:\+G)?\s[^|]{0,120}?(\d{1,7})MiB\s{0,4}\|", re.MULTILINE)


def extract(text: str) -> Iterator[Finding]:
    usages = list(_USAGE.finditer(text))
    if not usages:
        return
    # The GPU closest to full is the one that ran out.
    top = max(usages, key=lambda m: int(m.group(1)) / max(int(m.group(2)), 1))
    used, total = int(top.group(1)) / 1024, int(top.group(2)) / 1024
    detail = snippet(text, top.start(), top.end())
    yield Finding("smi.memory_used_gib", round(used, 4), detail)
    yield Finding("smi.memory_total_gib", round(total, 4), detail)
    yield Finding("gpu.memory_gib", round(total, 4), detail)
    if total:
        yield Finding("smi.used_ratio", round(used / total, 4), detail)
    yield Finding("smi.gpu_count", len(usages), f"{len(usages)} GPU rows")
    if len(usages) > 1:
        used_all = [int(m.group(1)) / 1024 for m in usages]
        spread = max(used_all) - min(used_all)
        yield Finding("smi.used_spread_gib", round(spread, 3), f"GPUs use {min(used_all):.1f}–{max(used_all):.1f} GiB")
    names = _NAME.findall(text)
    if names:
        from ..catalog import gpus
        gpu = gpus.resolve_gpu(names[0])
        if gpu is not None:
            yield Finding("gpu.name", gpu.id, names[0].strip())
    processes = _PROCESS.findall(text)
    if processes:
        yield Finding("smi.process_count", len(processes), f"{len(processes)} process rows")
