"""The simple rules other tools use, for the published-measurements comparison (pure Python).

* ``accelerate_rule``: ``accelerate estimate-memory`` (accelerate 1.16,
  ``commands/estimate.py``): the parameter count from the config on the meta
  device times the dtype's bytes, and "Training using Adam" =
  ``max(model, gradients, optimizer, step)`` of ``estimate_training_usage``:
  16 B per parameter for float32, 8 B for float16/bfloat16 (4× the weights'
  size in that dtype).  It has no figure for adapters or for int8/int4
  training ("N/A"); for LoRA and QLoRA rows the rule's number is therefore the
  size of the loaded weights (int4 = 1/8 of fp32, as its table shows), which
  is what a user of the tool would read off.
* ``gpu_poor_rule``: RahulSChand/gpu_poor's ``src/App.js``
  (``getAllComputedData`` → ``convertToMBModelSize`` + ``getGradOptMemory`` +
  ``getActivationMemory`` × 0.15 with gradient checkpointing + a fixed 650 MB),
  ported line by line: the parameter count is its own
  ``vocab·h·2 + L·4·h² + L·3·I·h`` (no grouped-query attention), floats are
  always 2 bytes, LoRA is a fixed rank-8-like ``L·8·h`` adapter, and the
  result is in MiB.  Optimizers other than SGD count as Adam (its only two).
"""
from __future__ import annotations

import math

MIB = 1024 ** 2
GIB = 1024 ** 3


def accelerate_rule(params: int, load_dtype: str, method: str) -> float:
    """GiB that ``accelerate estimate-memory`` shows for this row."""
    fp32 = 4 * params
    if method == "full":
        if load_dtype == "fp32":
            return 4 * fp32 / GIB                       # step = 4 × fp32 size
        return 2 * fp32 / GIB                           # optimizer = step = 2 × fp32 size (bf16 / fp16)
    sizes = {"fp32": fp32, "bf16": fp32 / 2, "fp16": fp32 / 2, "int8": fp32 / 4, "nf4": fp32 / 8, "fp4": fp32 / 8}
    return sizes[load_dtype] / GIB


def _gpu_poor_extra(L: int, h: int, inter: int, quant: str, context: int) -> float:
    common = (10 * h + 5 * h + 4 * inter + 2 * inter) * L
    base_len = 50
    ratio = context / 50
    root = math.sqrt(ratio) if ratio > 1.0 else 1.0
    if quant == "bnb_int8":
        return 0.75 * common * base_len * root * 1.25
    if quant == "bnb_q4":
        return 1.0 * common * base_len * root * 1.0
    if quant == "qlora":
        return 0.75 * common * base_len * root * 1.0
    return 0.0


def _gpu_poor_grad_opt(full: str, opt: str, quant: str, model_size: float, fb: float, L: int, h: int, inter: int,
                       context: int, batch: int) -> float:
    if full == "qlora" and opt == "adam_opt":
        return L * 8 * h * 0.5 * 4 * 3 + _gpu_poor_extra(L, h, inter, "qlora", context) * batch
    if full == "qlora" and opt == "sgd_opt":
        return L * 8 * h * 0.5 * 4 * 1 + _gpu_poor_extra(L, h, inter, "qlora", context) * batch
    if full == "full_trn" and opt == "adam_opt" and quant == "no_quant":
        return model_size * 3 * fb
    if full == "full_trn" and opt == "adam_opt" and quant == "bnb_int8":
        return model_size * 3 * 1 + _gpu_poor_extra(L, h, inter, quant, context) * batch
    if full == "full_trn" and opt == "adam_opt" and quant == "bnb_q4":
        return model_size * 3 * 0.5 + _gpu_poor_extra(L, h, inter, quant, context) * batch
    if full == "full_trn" and opt == "sgd_opt" and quant == "no_quant":
        return model_size * 1 * fb
    if full == "lora_trn" and opt == "adam_opt" and quant == "no_quant":
        return L * 8 * h * 2 * 4 * 3 * 2
    if full == "lora_trn" and opt == "adam_opt" and quant in ("bnb_int8", "bnb_q4"):
        return L * 8 * h * 2 * 4 * 3 + _gpu_poor_extra(L, h, inter, quant, context) * batch
    if full == "lora_trn" and opt == "sgd_opt" and quant == "no_quant":
        return L * 8 * h * 2 * 4 * 2
    if full == "lora_trn" and opt == "sgd_opt" and quant in ("bnb_int8", "bnb_q4"):
        return L * 8 * h * 2 * 4 * 1 + _gpu_poor_extra(L, h, inter, quant, context) * batch
    raise ValueError(f"gpu_poor has no rule for {full}, {opt}, {quant}")


def _gpu_poor_activations(L: int, h: int, heads: int, inter: int, context: int, fb: float, batch: int) -> float:
    n = context
    attn = (n * h * 3 * fb + n * h * 2 * fb + n * n * heads * fb + n * n * heads * 4 + n * n * heads * fb
            + n * h * fb + n * h * fb + n * h * fb)
    ffn = h * n * fb + h * n * fb + fb * 5 * n * inter + inter * n * fb
    norm = n * 4 * 2 + n * h * fb * 6
    return (attn + ffn + norm) * L * batch


def gpu_poor_rule(*, vocab: int, hidden: int, heads: int, intermediate: int, layers: int, method: str,
                  load_dtype: str, optimizer: str, batch: int, seq: int, grad_checkpointing: bool) -> float:
    """GiB of gpu_poor's training estimate for this row (its "Total", converted from MiB)."""
    L, h, inter = layers, hidden, intermediate
    fb = 2.0                                            # convertToBytes() always returns 2
    full = {"full": "full_trn", "freeze": "full_trn", "lora": "lora_trn", "qlora": "qlora"}[method]
    quant = "no_quant"
    if full != "qlora" and load_dtype == "int8":
        quant = "bnb_int8"
    elif full != "qlora" and load_dtype in ("nf4", "fp4"):
        quant = "bnb_q4"
    opt = "sgd_opt" if optimizer in ("sgd", "sgd_momentum") else "adam_opt"
    model_size = vocab * h * 2 + L * 4 * h * h + L * 3 * inter * h
    size = model_size * fb / MIB                        # convertToMBModelSize
    extra = 0.06 * size if quant in ("bnb_int8", "bnb_q4") or full == "qlora" else 0.0
    if quant == "bnb_int8":
        size = size / 2
    if quant == "bnb_q4":
        size = size / 4
    if full == "qlora":
        size = size / 4 - (model_size * 2) / (64 * MIB)
    model_mb = size + extra
    activations = _gpu_poor_activations(L, h, heads, inter, seq, fb, batch) / MIB
    if grad_checkpointing:
        activations *= 0.15
    grad_opt = _gpu_poor_grad_opt(full, opt, quant, model_size, fb, L, h, inter, seq, batch) / MIB
    total_mb = model_mb + grad_opt + activations + 650
    return math.ceil(total_mb) / 1024
