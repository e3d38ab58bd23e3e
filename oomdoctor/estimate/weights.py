"""Bytes of the model's weights on the GPU, before any sharding."""
from __future__ import annotations

from dataclasses import dataclass

from . import anatomy
from .dtypes import FLOAT_BYTES, GIB, count, nf4_bytes_per_param
from .setup import Setup
from .trainable import Trainable, base_float_bytes

DTYPE_NAMES = {4: "fp32", 2: "16-bit", 1: "int8"}


@dataclass(frozen=True)
class Weights:
    frozen: float       # bytes of weights that do not train
    trained: float      # bytes of the weights that train (the optimizer's parameters)
    lines: tuple[str, ...]

    @property
    def total(self) -> float:
        return self.frozen + self.trained


def quantized_bytes(setup: Setup) -> tuple[float, int, str]:
    """Bytes of bitsandbytes-quantised linear weights (lm_head excluded, as bnb skips it)."""
    from .adapters import as_loaded
    blocks = anatomy.quantized_blocks(as_loaded(setup.model, True))
    n = sum(b.weights for b in blocks)
    if setup.load_dtype == "int8":
        total = sum(b.weights * (1 + 4 / b.d_in) for b in blocks)
        return total, n, f"{n:,} linear weights × (1 B + one fp32 scale per row of d_in) (LLM.int8)"
    per = nf4_bytes_per_param(setup.double_quant)
    how = "with double quantisation" if setup.double_quant else "without double quantisation"
    return n * per, n, f"{n:,} linear weights × {per:.6f} B ({setup.load_dtype.upper()}, block 64, {how})"


def weights(setup: Setup, trainable: Trainable) -> Weights:
    """Weights resident on one replica.

    Float loads: every parameter × the dtype's bytes.  Quantised loads: the
    linear layers at the quantised size (see ``dtypes``) and the rest —
    embeddings, norms, biases and lm_head, which bitsandbytes leaves alone —
    at 16 bits.  LoRA adapters and modules_to_save copies come on top of the
    frozen base.
    """
    shape = setup.model
    total = anatomy.total_params(shape)
    fb = base_float_bytes(setup)
    if setup.method in ("full", "freeze"):
        all_b = total * fb
        trained = trainable.bytes
        line = f"weights: {count(total)} params × {fb} B ({_name(setup, fb)}) = {all_b / GIB:.2f} GiB"
        return Weights(all_b - trained, trained, (line,))
    lines = []
    if setup.quantized:
        qb, n, how = quantized_bytes(setup)
        rest = total - n
        base = qb + rest * fb
        from .adapters import as_loaded
        experts = sum(b.weights for b in anatomy.blocks(as_loaded(shape, True)) if b.expert
                      and getattr(as_loaded(shape, True), "experts_fused", True))
        lines.append(f"weights: {how} = {qb / GIB:.2f} GiB; embeddings, norms, biases and lm_head "
                     f"{count(rest)} params × {fb} B = {rest * fb / GIB:.2f} GiB")
        if experts:
            lines.append(f"weights: bitsandbytes quantises nn.Linear modules only; transformers 5 keeps the routed "
                         f"experts in 3-D parameters, so their {count(experts)} weights stay at {fb} B")
    else:
        base = total * fb
        lines.append(f"weights: {count(total)} frozen params × {fb} B ({_name(setup, fb)}) = {base / GIB:.2f} GiB")
    adapters = trainable.bytes
    if adapters:
        lines.append(f"weights: trainable parameters {trainable.params:,} = {adapters / GIB:.3f} GiB")
    return Weights(base, adapters, tuple(lines))


def _name(setup: Setup, fb: int) -> str:
    if setup.load_dtype in FLOAT_BYTES and FLOAT_BYTES[setup.load_dtype] == fb:
        return setup.load_dtype
    return "cast to half by DeepSpeed" if fb == 2 else DTYPE_NAMES.get(fb, f"{fb} B")
