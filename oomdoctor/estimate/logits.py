"""The language-model head's logits and the cross-entropy loss over them.

transformers' ``ForCausalLMLoss`` upcasts the logits (``logits.float()``) and
calls ``cross_entropy`` = ``log_softmax`` + ``nll_loss``.  Per token, with V
the vocabulary and p the compute dtype:

* forward: the half logits ``p·V``, their fp32 copy ``4V`` and log_softmax's
  fp32 output ``4V`` (which it saves) exist together: ``(p + 8)·V`` (``8V`` in
  fp32, where ``.float()`` returns the same tensor);
* after the forward only log_softmax's output ``4V`` is kept (the Trainer drops
  the model output, and with it the half logits, before ``backward``);
* backward: ``nll_loss`` produces a fp32 gradient ``4V``, and
  ``log_softmax_backward`` a new fp32 gradient ``4V`` while the saved output is
  still held: ``12V``, the peak; the half cast of that gradient, ``4V + p·V``,
  comes after the saved output is freed.

Measured with torch's MemTracker on CPU over one forward and backward of a
one-layer Llama with V = 32,000 and 1,024 tokens: 12.04·T·V bytes at the
peak in fp32 and 12.03·T·V in bf16.  TRL's chunked or per-row log-softmax
(``selective_log_softmax``) and Liger's fused loss keep less; this is the
plain Trainer path.
"""
from __future__ import annotations

from dataclasses import dataclass

from .dtypes import GIB


@dataclass(frozen=True)
class Logits:
    forward: float
    backward: float
    lines: tuple[str, ...]


def logits(tokens: int, vocab: int, p: int, lm_head: bool = True) -> Logits:
    if not lm_head:
        return Logits(0.0, 0.0, ("logits: none (a score head replaces the LM head)",))
    forward = tokens * vocab * ((p + 8) if p < 4 else 8)
    backward = 12 * tokens * vocab
    line = (f"logits: {tokens:,} tokens × {vocab:,} vocab × 12 B (fp32 log-softmax output, its gradient "
            f"and nll_loss's gradient at the start of backward) = {backward / GIB:.2f} GiB")
    return Logits(forward, backward, (line,))
