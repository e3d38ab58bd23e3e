"""What evaluation holds beside the training state: the logits the Trainer keeps, and generation's KV cache.

Kept logits (transformers ``Trainer.evaluate`` / ``evaluation_loop``, 4.41 and later):

* ``evaluate`` passes ``prediction_loss_only=True`` unless ``compute_metrics``
  is set, so without it nothing is kept; ``prediction_loss_only=True`` in the
  arguments turns it off as well.
* Each step's logits (``eval batch × length × vocabulary`` in the compute
  dtype) are padded and gathered across processes
  (``accelerator.gather_for_metrics``: every rank receives every rank's
  batch), then ``EvalLoopContainer.add`` concatenates them onto what is
  already kept.  ``torch.cat`` builds the grown tensor while the old one is
  still referenced, so the peak at step k is the old ``(k - 1)`` steps, the
  new ``k`` steps and the step's own logits: about ``2k`` steps.
* With ``eval_accumulation_steps = a`` the container moves to host RAM every
  ``a`` steps, so at most ``a`` steps stay on the GPU; on the host they are
  numpy arrays, and numpy has no bfloat16, so ``nested_numpify`` stores
  float32 (4 B per value), concatenated again (old and new together).
  Without it the whole evaluation stays on the GPU and is copied to the host
  once at the end.
* ``preprocess_logits_for_metrics`` returning the argmax keeps one int64 per
  token instead of a vocabulary row.

Generation (``predict_with_generate``): ``DynamicCache`` keeps keys and values
for every layer, ``2 · layers · kv_heads · head_dim`` values per token, for
``eval batch × beams`` rows of prompt + new tokens, and grows one layer at a
time with ``torch.cat`` (that layer's old and new tensors together).  Each
decoding step also holds the last position's logits in fp32 and their
softmax, ``2 · 4 · V`` per row.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import anatomy
from .derivation import Line, line
from .dtypes import GIB
from .setup import Setup

TRAINER_EVAL_BATCH = 8      # TrainingArguments.per_device_eval_batch_size's default
ARGMAX_BYTES = 8            # int64 token ids from preprocess_logits_for_metrics
HOST_FLOAT = 4              # nested_numpify: bfloat16 has no numpy dtype, float32 is stored


@dataclass(frozen=True)
class Evaluation:
    batch: int                  # per-device evaluation batch
    kept_before: float          # logits kept on the GPU while the next evaluation step runs
    kept_peak: float            # kept logits at the concatenation (old, new and the step's own)
    step_bytes: float           # what one evaluation step adds to the kept logits (all ranks' rows)
    steps_held: int | None      # evaluation steps held on the GPU at once; None: unknown (no eval set size)
    host: float                 # host RAM for the kept predictions, all ranks together
    generation: float           # KV cache, its growth and the decoding step's logits
    lines: tuple[Line, ...] = field(default_factory=tuple)


def keeps_logits(setup: Setup) -> bool:
    return setup.eval_compute_metrics and not setup.eval_prediction_loss_only


def evaluates(setup: Setup) -> bool:
    return bool(setup.eval_batch_size) or keeps_logits(setup) or setup.eval_generate


def _gathering_ranks(setup: Setup) -> int:
    """Ranks whose batches gather_for_metrics hands to every rank (data parallel; one process otherwise)."""
    return setup.num_gpus if setup.strategy in ("ddp", "fsdp", "deepspeed") else 1


def evaluation(setup: Setup, p: int) -> Evaluation:
    """What evaluation keeps, for a set-up that evaluates (``evaluates(setup)``); ``p`` the compute dtype."""
    d = anatomy.dims(setup.model)
    batch = setup.eval_batch_size or TRAINER_EVAL_BATCH
    s = setup.seq_len
    lines: list[Line] = []
    kept_before = kept_peak = step_bytes = host = 0.0
    held: int | None = None
    if keeps_logits(setup):
        ranks = _gathering_ranks(setup)
        # predict_with_generate keeps the generated ids, not logits; the labels (int64) are kept beside them.
        ids = setup.eval_preprocess_logits or setup.eval_generate
        per_token = (ARGMAX_BYTES if ids else d.vocab * p) + ARGMAX_BYTES
        step_rows = ranks * batch
        step_bytes = step_rows * s * per_token
        if setup.eval_accumulation_steps:
            rows = setup.eval_accumulation_steps * step_rows
            rows = min(rows, setup.eval_samples) if setup.eval_samples else rows
        else:
            rows = setup.eval_samples or step_rows
        held = math.ceil(rows / step_rows) if (setup.eval_samples or setup.eval_accumulation_steps) else None
        kept = rows * s * per_token
        # The step's own logits: on one process without preprocessing they are what was gathered.
        own = batch * s * d.vocab * p if (ranks > 1 or setup.eval_preprocess_logits) else 0.0
        kept_before = max(kept - step_bytes, 0.0)
        kept_peak = 2 * kept + own
        what = line("evaluation.token_ids") if ids else line("evaluation.vocab_rows", vocab=d.vocab, bytes=p)
        if setup.eval_accumulation_steps:
            held_what = line("evaluation.held_steps", steps=held)
        elif setup.eval_samples:
            held_what = line("evaluation.held_all", samples=setup.eval_samples)
        else:
            held_what = ""
        lines.append(line("evaluation.kept", what=what, gib=step_bytes / GIB, ranks=ranks, batch=batch, tokens=s,
                          held=held_what, peak=kept_peak / GIB))
        if setup.eval_samples:
            host_per_token = (ARGMAX_BYTES if ids else d.vocab * HOST_FLOAT) + ARGMAX_BYTES
            host_once = setup.eval_samples * s * host_per_token
            # Every rank receives all ranks' predictions; concatenating on the host, old and new are alive together.
            host = ranks * host_once * (2 if setup.eval_accumulation_steps else 1)
            lines.append(line("evaluation.host", samples=setup.eval_samples, tokens=s, ranks=ranks,
                              doubled=line("evaluation.host_doubled") if setup.eval_accumulation_steps else "",
                              gib=host / GIB))
    generation = 0.0
    if setup.eval_generate:
        new_tokens = setup.gen_new_tokens or 0
        rows = batch * setup.gen_beams
        length = s + new_tokens
        per_token_layer = 2 * d.kv_dim * p
        cache = rows * length * per_token_layer * d.layers
        growth = rows * length * per_token_layer          # one layer's old and new tensors during torch.cat
        step_logits = rows * d.vocab * 4 * 2
        generation = cache + growth + step_logits
        lines.append(line("evaluation.generation", rows=rows, batch=batch, beams=setup.gen_beams, tokens=length,
                          layers=d.layers, bytes=per_token_layer, gib=cache / GIB))
    return Evaluation(batch, kept_before, kept_peak, step_bytes, held, host, generation, tuple(lines))
