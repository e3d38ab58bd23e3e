"""Bytes per element of each storage format, derived from the formats' layouts.

The quantised formats are not a round number of bytes: each block of weights
carries a scale, and with double quantisation the scales are themselves
quantised.  The figures below are computed from bitsandbytes' block layout
rather than copied, so a change of block size changes every figure with it.
"""
from __future__ import annotations

GIB = 1024 ** 3

# IEEE / bfloat16 element sizes.
FLOAT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}

# bitsandbytes 0.50 `functional.quantize_4bit`: 64 weights per block, one fp32
# absmax each; with `compress_statistics` (double quantisation) the absmaxes are
# quantised blockwise to 8 bits in blocks of 256, each block keeping one fp32
# absmax (plus one fp32 offset for the whole tensor, negligible).
NF4_BLOCK = 64
NF4_DQ_BLOCK = 256


def nf4_bytes_per_param(double_quant: bool = True, block: int = NF4_BLOCK, dq_block: int = NF4_DQ_BLOCK) -> float:
    """Bytes per quantised weight in NF4/FP4.

    4 bits of code = 0.5 B.  Without double quantisation each block adds a fp32
    absmax: 4/64 = 0.0625 B, total 0.5625 B.  With it (QLoRA paper, §3, "Double
    Quantization": 32/64 = 0.5 bit falls to 8/64 + 32/(64·256) = 0.127 bit) each
    block adds one byte and each 256 blocks one fp32: 1/64 + 4/(64·256) =
    0.015869 B, total 0.515869 B (4.127 bits).
    """
    code = 4 / 8
    if not double_quant:
        return code + 4 / block
    return code + 1 / block + 4 / (block * dq_block)


def int8_bytes_per_param(d_in: int) -> float:
    """LLM.int8 (bitsandbytes `Int8Params`): one int8 per weight plus one fp32
    scale per output row (`SCB`), i.e. 4/d_in bytes per weight."""
    return 1 + 4 / d_in


def weight_bytes(load_dtype: str, d_in: int = 4096, double_quant: bool = True) -> float:
    """Bytes per weight of a linear layer stored in ``load_dtype``."""
    if load_dtype in FLOAT_BYTES:
        return FLOAT_BYTES[load_dtype]
    if load_dtype in ("nf4", "fp4"):
        return nf4_bytes_per_param(double_quant)
    if load_dtype == "int8":
        return int8_bytes_per_param(d_in)
    raise ValueError(f"unknown load dtype {load_dtype!r}")


def gib(n_bytes: float) -> float:
    return n_bytes / GIB


def count(n: float) -> str:
    """A parameter count as people write it: 8.03e9."""
    mantissa, exponent = f"{n:.2e}".split("e")
    return f"{mantissa}e{int(exponent)}"
