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
``bench/accuracy/data/grid.json``).  That is the plain Trainer path
(``loss="full"``).  The other loss implementations keep less:

* ``chunked``: torchtune's ``CEWithChunkedOutputLoss``
  (``torchtune/modules/loss/ce_chunked_output_loss.py``): the model returns
  the logits as C chunks (``num_output_chunks`` = 8), all ``p·V`` alive when
  the loss starts; each chunk is upcast and put through ``cross_entropy`` on
  its own, so the forward's working set is ``p·V`` + the kept log-softmax
  outputs + one chunk's fp32 copy: ``(p + 4 + 4/C)·V`` (``8V`` in fp32).  The
  recipe drops the logits list (``del logits``), so ``4V`` is kept, and the
  backward's peak is the kept outputs and one chunk's two fp32 gradients,
  ``(4 + 8/C)·V``.  Compiled (``compile=True`` compiles the per-chunk
  upcast and cross-entropy), inductor saves the half-precision chunk itself
  and its row statistics instead of the fp32 output: ``p·V`` kept, the
  forward's working set ``p·V``, backward ``(p + p/C)·V``.  CPU-measured
  uncompiled by ``bench/accuracy/measure_mechanisms.py``.
* ``fused_linear``: Liger's ``LigerFusedLinearCrossEntropyFunction``
  (``liger_kernel/ops/fused_linear_cross_entropy.py``,
  ``fused_linear_cross_entropy_forward``) never materialises the logits:
  tokens go through lm_head in chunks of
  ``next_power_of_2(ceil(T / ceil(V / H)))`` rows, each chunk's logits are
  turned into their gradient in place, and the input's gradient ``p·H`` per
  token (and lm_head's weight gradient, when it trains) is computed in the
  forward pass and kept for backward; fp32 per-token losses ``4``.
* ``cce``: Apple's Cut Cross-Entropy (``cut_cross_entropy/cce.py``,
  ``LinearCrossEntropyFunction.forward`` saves the embeddings ``e``, the
  classifier and the fp32 log-sum-exp; ``cce_backward.py`` allocates the
  embeddings' gradient ``zeros_like(e)``): ``p·H + 4`` kept per token,
  ``p·H`` more in backward, no vocabulary-sized tensor at all.
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


LOSSES = ("full", "chunked", "fused_linear", "cce")


def fused_chunk_rows(tokens: int, vocab: int, hidden: int) -> int:
    """Rows of one chunk in Liger's fused linear cross-entropy (see the module docstring)."""
    inc = -(-vocab // hidden)
    rows = -(-tokens // inc)
    return 1 << max(rows - 1, 0).bit_length()


def logits(tokens: int, vocab: int, p: int, lm_head: bool = True, softcap: bool = False, loss: str = "full",
           hidden: int = 0, chunks: int = 8, compiled: bool = False, head_grad: float = 0.0) -> Logits:
    """The loss's memory for ``tokens`` tokens; ``head_grad`` is lm_head's weight gradient in bytes when it
    trains (a fused loss computes it in the forward pass)."""
    if not lm_head:
        return Logits(0.0, 0.0, (line("logits.none"),))
    if loss == "chunked":
        return _chunked(tokens, vocab, p, chunks, compiled)
    if loss == "fused_linear":
        rows = min(fused_chunk_rows(tokens, vocab, hidden), tokens)
        kept = tokens * (p * hidden + 4) + head_grad
        chunk = rows * vocab * p
        said = line("logits.fused_linear", tokens=tokens, hidden=hidden, bytes=p, rows=rows, vocab=vocab,
                    chunk_gib=chunk / GIB, gib=kept / GIB)
        return Logits(kept + chunk, kept, (said,), kept, 0.0)
    if loss == "cce":
        kept = tokens * (p * hidden + 4)
        said = line("logits.cce", tokens=tokens, hidden=hidden, bytes=p, gib=(kept + tokens * p * hidden) / GIB)
        return Logits(kept, kept + tokens * p * hidden, (said,), kept, 0.0)
    cap = p if softcap else 0
    forward = tokens * vocab * (p + (4 if p < 4 else 0) + 4 + cap)
    backward = (12 + cap) * tokens * vocab
    kept = (4 + cap) * tokens * vocab
    grad = p * tokens * vocab
    said = line("logits.softcapped" if softcap else "logits.full", tokens=tokens, vocab=vocab, bytes=12 + cap,
                gib=backward / GIB)
    return Logits(forward, backward, (said,), kept, grad)


def _chunked(tokens: int, vocab: int, p: int, chunks: int, compiled: bool) -> Logits:
    tv = tokens * vocab
    if compiled:
        forward, kept, backward = p * tv, p * tv, (p + p / chunks) * tv
    else:
        # in fp32 ``.float()`` returns the chunk itself: no copy
        forward, kept, backward = (p + 4 + (4 / chunks if p < 4 else 0)) * tv, 4 * tv, (4 + 8 / chunks) * tv
    said = line("logits.chunked_compiled" if compiled else "logits.chunked", tokens=tokens, vocab=vocab,
                chunks=chunks, bytes=backward / tv, gib=backward / GIB)
    return Logits(forward, backward, (said,), kept, p * tv)
