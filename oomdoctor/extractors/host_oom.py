"""Host-side kills: exit codes and the kernel's OOM-killer lines."""
from __future__ import annotations

import re
from typing import Iterator

from . import Finding, snippet

NAME = "host_kill"
PRODUCES = {"process.exit_code", "host.oom_killed", "host.killed_rss_gib"}

_EXIT = re.compile(
    r"(?:exit ?code|exitcode|return ?code|returncode|exit status|exited with code)\s{0,3}[:=]?\s{0,3}(-?\d{1,3})\b"
    r"|died with <Signals\.SIG(KILL|SEGV|BUS|ABRT)",
    re.IGNORECASE,
)
_SIGNALS = {"KILL": -9, "SEGV": -11, "BUS": -7, "ABRT": -6}
_KILLED = re.compile(r"Out of memory: Kill(?:ed)? process\s{1,3}\d{1,10}", re.IGNORECASE)
_RSS = re.compile(r"anon-rss:\s{0,2}(\d{1,15})kB", re.IGNORECASE)


def extract(text: str) -> Iterator[Finding]:
    codes = []
    for match in _EXIT.finditer(text):
        code = _SIGNALS[match.group(2).upper()] if match.group(2) else int(match.group(1))
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
