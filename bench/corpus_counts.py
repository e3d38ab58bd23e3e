"""Print the Counts section of tests/corpus/README.md from the corpus itself (``--write`` puts it there).

The README's figures were typed once and went stale as blind sets were added; a test now holds the
section equal to this script's output, so adding a case means running ``--write``.
"""
from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"
README = CORPUS / "README.md"
BEGIN, END = "<!-- counts:begin -->", "<!-- counts:end -->"

# Message formats, each by a substring a log in that format prints (searched case-sensitively).
FORMATS = (
    ("PyTorch CUDA OOM, old wording (`... total capacity; ...`)", "total capacity;"),
    ("PyTorch CUDA OOM, new wording (`GPU N has a total capacity of ...`)", "has a total capacity of"),
    ("driver-level `CUDA error: out of memory`", "CUDA error: out of memory"),
    ("TF/XLA `CUDA_ERROR_OUT_OF_MEMORY`", "CUDA_ERROR_OUT_OF_MEMORY"),
    ("`CUBLAS_STATUS_ALLOC_FAILED`", "CUBLAS_STATUS_ALLOC_FAILED"),
    ("`CUDNN_STATUS_ALLOC_FAILED`", "CUDNN_STATUS_ALLOC_FAILED"),
    ("`CUDNN_STATUS_NOT_ENOUGH_MEMORY`", "CUDNN_STATUS_NOT_ENOUGH_MEMORY"),
    ("`CUDNN_STATUS_NOT_INITIALIZED`", "CUDNN_STATUS_NOT_INITIALIZED"),
    ("`HIP out of memory`", "HIP out of memory"),
    ("MLX / Metal `kIOGPUCommandBufferCallbackErrorOutOfMemory`", "kIOGPUCommandBufferCallbackErrorOutOfMemory"),
    ("ipex `Allocation is out of device memory`", "Allocation is out of device memory"),
    ("`MPS backend out of memory`", "MPS backend out of memory"),
    ("`XPU out of memory`", "XPU out of memory"),
    ("Level-Zero / XPU `out of device memory`", "out of device memory"),
    ("bitsandbytes `Error out of memory at line`", "Error out of memory at line"),
    ("TF `ResourceExhaustedError`", "ResourceExhaustedError"),
    ("TF `OOM when allocating tensor`", "OOM when allocating tensor"),
    ("JAX/XLA `RESOURCE_EXHAUSTED`", "RESOURCE_EXHAUSTED"),
    ("`Killed`", "Killed"),
    ("`exitcode: -9` (torchrun)", "exitcode: -9"),
    ("`return code = -9` (deepspeed launcher)", "return code = -9"),
    ("`exit code 137`", "exit code 137"),
    ("dmesg `Out of memory: Killed process`", "Out of memory: Killed process"),
    ("`std::bad_alloc`", "std::bad_alloc"),
    ("`DefaultCPUAllocator: can't allocate memory`", "DefaultCPUAllocator: can't allocate memory"),
    ("`[Errno 12] Cannot allocate memory`", "[Errno 12] Cannot allocate memory"),
    ("tcmalloc `large alloc`", "tcmalloc: large alloc"),
    ("`DataLoader worker (pid ...) is killed by signal`", "is killed by signal"),
    ("`Bus error`", "Bus error"),
    ("`insufficient shared memory (shm)`", "insufficient shared memory"),
    ("NCCL watchdog timeout", "Watchdog caught collective operation timeout"),
    ("`an illegal memory access was encountered`", "an illegal memory access was encountered"),
    ("`device-side assert triggered`", "device-side assert triggered"),
    ("`CUBLAS_STATUS_EXECUTION_FAILED`", "CUBLAS_STATUS_EXECUTION_FAILED"),
    ("`CUBLAS_STATUS_NOT_SUPPORTED`", "CUBLAS_STATUS_NOT_SUPPORTED"),
    ("`CUDNN_STATUS_NOT_SUPPORTED`", "CUDNN_STATUS_NOT_SUPPORTED"),
    ("`No space left on device`", "No space left on device"),
)


def _table(header: tuple[str, ...], rows) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines + [""]


def section() -> str:
    paths = sorted(CORPUS.glob("*.yaml"))
    cases = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in paths]
    logs = [(p.with_suffix(".log")).read_text(encoding="utf-8", errors="replace") for p in paths
            if p.with_suffix(".log").exists()]
    kinds = collections.Counter(c["oom_kind"] for c in cases)
    words = collections.Counter(c.get("wording", "(none)") for c in cases)
    primary = collections.Counter(c["scenario"] for c in cases)
    split: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for c in cases:
        split[c["scenario"]][c["oom_kind"]] += 1
    also = collections.Counter(a for c in cases for a in (c.get("also") or []))
    blind = collections.Counter(str(c.get("blind_set", 1 if c.get("blind") else "-")) for c in cases)
    out = [BEGIN, f"Total cases: {len(cases)} (blind sets: " +
           ", ".join(f"{k}: {v}" for k, v in sorted(blind.items()) if k != "-") + ")", ""]
    out += _table(("oom_kind", "cases"), sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
    out += _table(("wording", "cases"), sorted(words.items(), key=lambda kv: (-kv[1], kv[0])))
    out += _table(("scenario", "primary", "oom_kind split", "also (secondary)"),
                  [(s, n, ", ".join(f"{k} {v}" for k, v in sorted(split[s].items())), also.get(s, 0))
                   for s, n in sorted(primary.items(), key=lambda kv: (-kv[1], kv[0]))])
    out += _table(("message format (substring searched in the .log files)", "logs"),
                  [(label, sum(needle in log for log in logs)) for label, needle in FORMATS])
    return "\n".join(out + [END])


def replaced(readme: str, new: str) -> str:
    start, stop = readme.index(BEGIN), readme.index(END) + len(END)
    return readme[:start] + new + readme[stop:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="replace the section in tests/corpus/README.md")
    args = parser.parse_args()
    new = section()
    if args.write:
        README.write_text(replaced(README.read_text(encoding="utf-8"), new), encoding="utf-8")
    else:
        print(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
