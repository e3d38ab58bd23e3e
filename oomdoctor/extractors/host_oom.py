"""Host-side kills: exit codes, the kernel's OOM-killer lines and task dump, and host RAM a log reports."""
from __future__ import annotations

import re
from typing import Iterator

from . import Finding, snippet

NAME = "host_kill"
PRODUCES = {"process.exit_code", "host.oom_killed", "host.killed_rss_gib", "host.ram_used_gib", "host.ram_used_ratio",
            "host.ram_total_gib", "host.memory_pressure"}

_EXIT = re.compile(
    r"(?:exit ?code|exitcode|return ?code|returncode|exit status|exited with code|error ?code)\s{0,3}[:=]?\s{0,8}(-?\d{1,3})\b"
    r"|died with <Signals\.SIG(KILL|SEGV|BUS|ABRT)"
    # in words: "killed by signal 9", "terminated with SIGKILL", "got SIGKILL"
    r"|\b(?:killed|terminated|got|received)\s{1,3}(?:by|with)?\s{0,3}(?:signal\s{1,3}9\b(?![.\d])|SIG(KILL)\b)",
    re.IGNORECASE,
)
_SIGNALS = {"KILL": -9, "SEGV": -11, "BUS": -7, "ABRT": -6}
_KILLED = re.compile(r"Out of memory: Kill(?:ed)? process\s{1,3}\d{1,10}", re.IGNORECASE)
_RSS = re.compile(r"anon-rss:\s{0,2}(\d{1,15})kB", re.IGNORECASE)
# The OOM killer's task dump, one line per process:
# "[17798674.374495] [ 202779]  1000 202779 274650088 243385180 1957441536     7930          -998 python"
# (pid, uid, tgid, total_vm, rss in pages, pgtables_bytes, swapents, oom_score_adj, name). Nothing else prints it.
_TASK = re.compile(r"^\[\s{0,12}\d{1,10}\.\d{1,9}\]\s{1,4}\[\s{0,10}\d{1,10}\]\s{1,12}\d{1,10}\s{1,12}\d{1,10}\s{1,12}"
                   r"\d{1,15}\s{1,12}(\d{1,15})\s{1,12}\d{1,15}\s{1,12}\d{1,15}\s{1,12}-?\d{1,5}\s{1,4}\S{1,40}\s{0,4}$",
                   re.MULTILINE)
# DeepSpeed's see_memory_usage: "CPU Virtual Memory:  used = 28.43 GB, percent = 22.6%" (psutil, GiB).
_DS_CPU = re.compile(r"CPU Virtual Memory:\s{1,4}used\s{0,2}=\s{0,2}(\d{1,6}(?:\.\d{1,3})?)\s{0,2}GB,\s{0,2}"
                     r"percent\s{0,2}=\s{0,2}(\d{1,3}(?:\.\d{1,2})?)%")
_PAGE = 4096


def extract(text: str) -> Iterator[Finding]:
    codes = []
    for match in _EXIT.finditer(text):
        signal = match.group(2) or match.group(3)
        code = _SIGNALS[signal.upper()] if signal else -9 if match.group(1) is None else int(match.group(1))
        codes.append((code, snippet(text, match.start(), match.end())))
    # A kill by signal is the informative code; 0 and 1 are what the other ranks report.
    for code, detail in codes:
        if code in (-9, 137, 9):
            yield Finding("process.exit_code", code, detail)
            break
    else:
        nonzero = [c for c in codes if c[0] != 0]
        if nonzero:
            yield Finding("process.exit_code", nonzero[0][0], nonzero[0][1])
    killed = _KILLED.search(text)
    if killed:
        yield Finding("host.oom_killed", True, snippet(text, killed.start(), killed.end()))
        rss = _RSS.search(text, killed.start(), killed.start() + 400)
        if rss:
            yield Finding("host.killed_rss_gib", round(int(rss.group(1)) / 2**20, 3), snippet(text, rss.start(), rss.end()))
    tasks = list(_TASK.finditer(text))
    if len(tasks) >= 2:
        largest = max(tasks, key=lambda m: int(m.group(1)))
        detail = f"OOM-killer task dump, {len(tasks)} processes"
        yield Finding("host.oom_killed", True, detail)
        yield Finding("host.killed_rss_gib", round(int(largest.group(1)) * _PAGE / 2**30, 3),
                      snippet(text, largest.start(), largest.end()))
    usage = list(_DS_CPU.finditer(text))
    if usage:
        last = usage[-1]
        used, percent = float(last.group(1)), max(float(m.group(2)) for m in usage)
        detail = snippet(text, last.start(), last.end())
        yield Finding("host.ram_used_gib", used, detail)
        yield Finding("host.ram_used_ratio", round(percent / 100, 4), detail)
        if float(last.group(2)) >= 1:
            yield Finding("host.ram_total_gib", round(used * 100 / float(last.group(2)), 1), detail)
        if percent >= 80:
            yield Finding("host.memory_pressure", True, detail)
