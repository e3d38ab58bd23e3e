"""What FP8 training changes in memory, read from the libraries' source.  Mostly a speed feature.

FP8 runs the linear layers' matrix multiplies in 8 bits.  It does not touch what
training keeps in high precision: the weights stay in their loaded dtype (the
master copy), their gradients come out in the weights' dtype, the optimizer
states are the optimizer's, and the norms, attention, softmax, loss and logits
run as before.  So the model states and the logits are unchanged; what changes
is confined to the linear layers' inputs and casts:

* torchao float8 (``convert_to_float8_training``, torchao 0.18
  ``torchao/float8/float8_linear.py``): ``Float8Linear`` keeps its
  high-precision weight as the parameter, and ``matmul_with_hp_or_float8_args
  .forward`` saves ``input_hp, weight_hp_t`` for backward: the 16-bit input, not
  an 8-bit copy.  The casts are temporaries of one layer: in forward the fp8
  input and weight, in backward the output gradient cast twice (one per GEMM),
  the weight and the input cast again.  So nothing is saved; each linear adds
  its casts while it runs.  (``torch.compile`` may choose to save the fp8 cast
  instead; ``enable_fsdp_float8_all_gather`` gathers FSDP2 weights in fp8: not
  modelled.)
* Transformer Engine (``te.Linear`` under ``fp8_autocast``; accelerate's
  ``mixed_precision: fp8`` with ``fp8_backend: te`` converts ``nn.Linear`` to
  it; TE 2.20 ``transformer_engine/pytorch/module/linear.py``, ``_Linear``'s
  forward): a linear whose weight trains saves its input quantised to fp8,
  column-wise only (1 B per element), and saves the fp8 weight it computed
  with, row-wise and column-wise (about 2 B per weight), for its backward
  (not under FSDP2, which gathers again).  Each te.Linear quantises its own
  input, so q, k and v save three 8-bit copies where the 16-bit model saved
  one shared tensor; the SDPA output that o_proj reads stays saved by the
  attention itself.  The delayed-scaling amax history (1,024 fp32 values per
  quantised tensor per module) is a few MiB for a whole model: not counted.
  With frozen weights (adapters) TE saves no input; only full fine-tuning is
  modelled here.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import anatomy
from .derivation import Line, line
from .dtypes import GIB
from .setup import Setup

TE_WEIGHT_BYTES = 2         # fp8 data row-wise and its transpose column-wise, 1 B each


@dataclass(frozen=True)
class Fp8:
    kept: float = 0.0           # change to the activations kept for backward (negative: saved)
    weight_copies: float = 0.0  # fp8 weights saved from each layer's forward to its backward
    forward: float = 0.0        # one linear's casts in forward
    backward: float = 0.0       # one linear's casts in backward
    lines: tuple[Line, ...] = field(default_factory=tuple)


def fp8(setup: Setup, tokens: int, p: int, layers_kept: int) -> Fp8:
    """``tokens`` in the micro-batch, ``p`` the compute dtype's bytes, ``layers_kept`` the decoder layers whose
    saved activations are alive at once (all of them, or one under gradient checkpointing)."""
    if setup.fp8 == "none":
        return Fp8()
    blocks = [b for b in anatomy.blocks(setup.model) if b.role != anatomy.ROUTER]
    if setup.fp8 == "torchao":
        largest = max(blocks, key=lambda b: b.d_in * b.d_out + tokens * (b.d_in + 2 * b.d_out))
        forward = tokens * largest.d_in + largest.d_in * largest.d_out
        backward = tokens * (2 * largest.d_out + largest.d_in) + largest.d_in * largest.d_out
        return Fp8(0.0, 0.0, forward, backward, (line("fp8.torchao", gib=backward / GIB),))
    if setup.method != "full" or any(b.expert for b in blocks):
        return Fp8(lines=(line("fp8.te_not_modelled"),))
    d = anatomy.dims(setup.model)
    per_token = 0.0
    for role, width in ((anatomy.ATTN_IN, d.hidden), (anatomy.MLP_IN, d.hidden)):
        sharing = sum(1 for b in blocks if b.role == role)
        per_token += (sharing - p) * width if sharing else 0.0      # one fp8 copy each instead of one shared
    per_token += sum(b.d_in for b in blocks if b.role == anatomy.ATTN_OUT)          # beside SDPA's own output
    per_token += sum((1 - p) * b.d_in for b in blocks if b.role == anatomy.MLP_OUT)  # replaces the product
    kept = per_token * tokens * layers_kept
    per_layer_weights = sum(b.weights for b in blocks) / d.layers
    copies = TE_WEIGHT_BYTES * per_layer_weights * layers_kept
    return Fp8(kept, copies, 0.0, 0.0, (line("fp8.te", per_token=per_token, layers=layers_kept,
                                             kept=kept / GIB, copies=copies / GIB),))
