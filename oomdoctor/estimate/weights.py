"""Bytes of the model's weights on the GPU, before any sharding."""
from __future__ import annotations

from dataclasses import dataclass

from . import anatomy
from .adapters import as_loaded
from .derivation import Line, line
from .dtypes import FLOAT_BYTES, GIB, count, nf4_bytes_per_param
from .setup import Setup
from .trainable import Trainable, base_float_bytes

DTYPE_NAMES = {4: "fp32", 2: "16-bit", 1: "int8"}    # language-neutral names


@dataclass(frozen=True)
class Weights:
    frozen: float       # bytes of weights that do not train
    trained: float      # bytes of the weights that train (the optimizer's parameters)
    lines: tuple[Line, ...]

    @property
    def total(self) -> float:
        return self.frozen + self.trained


def quantized_bytes(setup: Setup) -> tuple[float, int, Line]:
    """Bytes of bitsandbytes-quantised linear weights (lm_head excluded, as bnb skips it)."""
    blocks = anatomy.quantized_blocks(as_loaded(setup.model, True))
    n = sum(b.weights for b in blocks)
    if setup.load_dtype == "int8":
        total = sum(b.weights * (1 + 4 / b.d_in) for b in blocks)
        return total, n, line("weights.int8", n=n)
    per = nf4_bytes_per_param(setup.double_quant)
    how = "weights.nf4_double" if setup.double_quant else "weights.nf4_single"
    return n * per, n, line(how, n=n, per=per, format=setup.load_dtype.upper())


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
        said = line("weights.all", count=count(total), bytes=fb, dtype=_name(setup, fb), gib=all_b / GIB)
        return Weights(all_b - trained, trained, (said,))
    lines = []
    if setup.quantized:
        qb, n, how = quantized_bytes(setup)
        rest = total - n
        base = qb + rest * fb
        if setup.kbit_fp32_upcast and setup.kbit_head_bf16:
            # TRL's SFTTrainer (up to 0.25) with bf16=True, after prepare_model_for_kbit_training, casts
            # embed_tokens and lm_head back to bf16 and keeps the norms fp32 (trl/trainer/utils.py,
            # peft_module_casting_to_bf16)
            d = anatomy.dims(shape)
            head = d.vocab * d.hidden * (1 if d.tied else 2)
            base -= head * (fb - 2)
            lines.append(line("weights.kbit_head_bf16", count=count(head), gib=head * (fb - 2) / GIB))
        lines.append(line("weights.quantized", how=how, gib=qb / GIB, rest=count(rest), bytes=fb,
                          rest_gib=rest * fb / GIB))
        loaded = as_loaded(shape, True)
        experts = sum(b.weights for b in anatomy.blocks(loaded) if b.expert and getattr(loaded, "experts_fused", True))
        if experts:
            lines.append(line("weights.experts_unquantised", count=count(experts), bytes=fb))
    else:
        base = total * fb
        lines.append(line("weights.frozen", count=count(total), bytes=fb, dtype=_name(setup, fb), gib=base / GIB))
    adapters = trainable.bytes + trainable.idle_bytes      # adapters that never get a gradient are still stored
    if adapters:
        lines.append(line("weights.trainable", params=trainable.params, gib=adapters / GIB))
    return Weights(base, adapters, tuple(lines))


def _name(setup: Setup, fb: int) -> str | Line:
    if setup.load_dtype in FLOAT_BYTES and FLOAT_BYTES[setup.load_dtype] == fb:
        return setup.load_dtype
    return line("weights.deepspeed_half") if fb == 2 else DTYPE_NAMES.get(fb, f"{fb} B")
