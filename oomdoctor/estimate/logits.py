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
  still held: ``12V``, the peak of the loss itself; then the saved output and
  nll's gradient go, and the logits' gradient in the compute dtype, ``p·V``,
  meets lm_head's weight gradient when lm_head trains (``grad``).  The two
  moments never overlap, so the start of backward needs the larger of
  ``12V`` and ``p·V`` + lm_head's gradient, not their sum.

Gemma 2 soft-caps the logits (``tanh(logits / 30) * 30``): tanh's output
``p·V`` is saved for backward and its product with the cap is what the loss
reads, so the forward's working set is ``p·V`` larger (``12V`` in fp32 and in
bf16 alike), ``(4 + p)·V`` is kept, and the loss's backward peak is
``(12 + p)·V``.

Measured on CPU, tensor by tensor, for every family of
``bench/accuracy/measure_grid.py`` (columns ``logits_*`` of
``bench/accuracy/data/grid.json``).  TRL's chunked or per-row log-softmax
(``selective_log_softmax``) and Liger's fused loss keep less; this is the
plain Trainer path.
"""
from __future__ import annotations

from dataclasses import dataclass

from .derivation import Line, line
from .dtypes import GIB


@dataclass(frozen=True)
class Logits:
    forward: float          # working set of the loss in the forward pass (kept part included)
    backward: float         # the loss's peak at the start of backward (kept part included)
    lines: tuple[Line, ...]
    kept: float = 0.0       # held from the end of the forward to the backward
    grad: float = 0.0       # the logits' gradient in the compute dtype, alive with lm_head's weight gradient


def logits(tokens: int, vocab: int, p: int, lm_head: bool = True, softcap: bool = False) -> Logits:
    if not lm_head:
        return Logits(0.0, 0.0, (line("logits.none"),))
    cap = p if softcap else 0
    forward = tokens * vocab * (p + (4 if p < 4 else 0) + 4 + cap)
    backward = (12 + cap) * tokens * vocab
    kept = (4 + cap) * tokens * vocab
    grad = p * tokens * vocab
    said = line("logits.softcapped" if softcap else "logits.full", tokens=tokens, vocab=vocab, bytes=12 + cap,
                gib=backward / GIB)
    return Logits(forward, backward, (said,), kept, grad)
