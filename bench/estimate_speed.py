"""How long `python -m oomdoctor estimate --json` takes to answer (prints timings; nothing is asserted).

Inputs: the issue's headline set-ups (Llama-3-8B full fine-tuning with AdamW on a
40 GB card, Llama-3-70B QLoRA on a 24 GB card), a bare parameter count, a pasted
config.json, and every set-up of bench/accuracy/published.yaml.  Each is timed
twice: as a fresh process (`python -m oomdoctor estimate --json ...`, interpreter
start and imports included, what a user waits for) and in-process through
``estimate_reply`` (the work itself: the estimate plus a what-if estimate for
every remedy in the knowledge base).

Usage: python bench/estimate_speed.py [--no-subprocess] [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from oomdoctor.catalog import get_model, to_hf_config  # noqa: E402
from oomdoctor.named_inputs import estimate_reply  # noqa: E402

SETUP_TO_INPUT = {"model": "model", "method": "method", "load_dtype": "load_dtype", "precision": "precision",
                  "optimizer": "optimizer", "batch_size": "batch_size", "seq_len": "seq_len",
                  "grad_accum": "grad_accum", "grad_checkpointing": "grad_checkpointing", "attention": "attention",
                  "packing": "packing", "lora_rank": "lora_rank", "lora_targets": "lora_targets",
                  "num_gpus": "num_gpus", "strategy": "strategy", "zero_stage": "zero_stage",
                  "offload_optimizer": "offload_optimizer", "offload_param": "offload_param"}


def inputs(config_path: Path) -> list[tuple[str, dict]]:
    out = [
        ("llama-3-8b full AdamW, 40 GB", {"model": "llama-3-8b", "method": "full", "optimizer": "adamw",
                                          "gpu_memory_gib": 40}),
        ("llama-3-70b QLoRA, 24 GB", {"model": "llama-3-70b", "method": "qlora", "gpu_memory_gib": 24}),
        ("13B by size, LoRA, A100 80GB", {"params_b": 13, "method": "lora", "gpu": "A100 80GB"}),
        ("pasted config.json (Qwen2.5-7B shape)", {"config": str(config_path), "method": "lora", "batch_size": 4,
                                                   "seq_len": 4096, "gpu": "RTX 4090"}),
    ]
    rows = yaml.safe_load((ROOT / "bench" / "accuracy" / "published.yaml").read_text())["rows"]
    seen = set()
    for row in rows:
        args = {SETUP_TO_INPUT[k]: v for k, v in row["setup"].items() if k in SETUP_TO_INPUT}
        if "lora_targets" in args:
            args["lora_targets"] = ",".join(args["lora_targets"])
        if args.get("method") not in ("lora", "qlora"):
            args.pop("lora_rank", None)
            args.pop("lora_targets", None)
        key = json.dumps(args, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append((f"published: {row['id'].removesuffix('-smi')}", args))
    return out


def cli_args(args: dict) -> list[str]:
    out = []
    for k, v in args.items():
        if isinstance(v, bool):
            v = "true" if v else "false"
        out += [f"--{k.replace('_', '-')}", str(v)]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-subprocess", action="store_true", help="time only in-process")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.json"
        config.write_text(json.dumps(to_hf_config(get_model("qwen2.5-7b"))))
        cases = inputs(config)
        estimate_reply(cases[0][1])            # warm the knowledge base and catalog caches once
        print(f"{'input':58} {'in-process ms':>14} {'process s':>10}  answer")
        worst_in, worst_proc = 0.0, 0.0
        for label, args in cases:
            times = []
            direct = dict(args)
            if "config" in direct:          # the CLI reads the file; the request takes its text
                direct["config"] = Path(direct["config"]).read_text()
            for _ in range(a.repeat):
                t0 = time.perf_counter()
                reply = estimate_reply(direct)
                times.append(time.perf_counter() - t0)
            inproc = statistics.median(times)
            proc = float("nan")
            if not a.no_subprocess:
                t0 = time.perf_counter()
                done = subprocess.run([sys.executable, "-m", "oomdoctor", "estimate", "--json", *cli_args(args)],
                                      cwd=ROOT, capture_output=True, text=True)
                proc = time.perf_counter() - t0
                if done.returncode != 0:
                    print(f"{label:58} failed: {done.stderr.strip()[-200:]}")
                    continue
                json.loads(done.stdout)
            est = reply["estimate"]
            worst_in, worst_proc = max(worst_in, inproc), max(worst_proc, proc if proc == proc else 0.0)
            print(f"{label[:58]:58} {1000 * inproc:14.1f} {proc:10.2f}  {est['per_gpu_gib']:.1f} GiB per GPU")
        print(f"\n{len(cases)} inputs; slowest in-process {1000 * worst_in:.1f} ms; "
              f"slowest fresh process {worst_proc:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
