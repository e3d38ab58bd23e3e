"""Ground truth on CPU for the RL rollout moment and FP8 (issue #13): prints measured against estimated bytes.

* ``kv cache``: a tiny random-weight Llama generates the way TRL 1.16's GRPOTrainer does without vLLM
  (left-padded prompts, sampling, a fixed number of new tokens) for per-device batch × steps per
  generation rows; the DynamicCache it returns is summed storage by storage against
  ``rollout.kv_cache_bytes`` (bf16, fp32, and fp32 under bf16 autocast).
* ``fp8 torchao``: the bytes autograd saves for backward with and without ``convert_to_float8_training``
  (``emulate=True`` runs on CPU), and whether any saved tensor is 8-bit.

Run: ``bench/accuracy/.venv/bin/python bench/accuracy/measure_rollouts.py`` (or the project's .venv with
torch, transformers and torchao installed). tests/test_rollout_measured.py and tests/test_fp8_measured.py
assert the same figures.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import torch  # noqa: E402

from test_fp8_measured import FP8_DTYPES, _saved  # noqa: E402
from test_rollout_measured import BATCH, NEW, PROMPT, STEPS, _generated_cache  # noqa: E402

from oomdoctor.estimate import Setup  # noqa: E402
from oomdoctor.estimate.rollout import kv_cache_bytes, rows  # noqa: E402
from test_estimate import TINY  # noqa: E402


def main() -> None:
    print(f"{'case':40} {'measured B':>12} {'estimated B':>12}")
    for load, precision, attention, autocast in (("bf16", "bf16", "sdpa", False), ("fp32", "fp32", "eager", False),
                                                 ("fp32", "bf16", "sdpa", True)):
        measured, _ = _generated_cache({"bf16": torch.bfloat16, "fp32": torch.float32}[load], attention, autocast)
        setup = Setup(model=TINY, method="full", load_dtype=load, precision=precision, attention=attention,
                      objective="grpo", batch_size=BATCH, grad_accum=STEPS, seq_len=PROMPT + NEW, gen_new_tokens=NEW)
        est = kv_cache_bytes(setup, rows(setup), PROMPT + NEW - 1)
        name = f"kv cache {load}{' + autocast' if autocast else ''} {attention}"
        print(f"{name:40} {measured:>12,} {est:>12,.0f}")
    plain, _, _ = _saved(convert=False)
    converted, dtypes, _ = _saved(convert=True)
    # the estimator's torchao figure is the bf16 one: the measured bf16 run is what it must equal
    print(f"{'saved for backward, torchao fp8':40} {converted:>12,} {plain:>12,}   (estimate = the bf16 run's "
          f"bytes; 8-bit tensors saved: {bool(dtypes & FP8_DTYPES)})")


if __name__ == "__main__":
    main()
