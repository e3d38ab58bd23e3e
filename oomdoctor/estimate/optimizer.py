"""Optimizer states, fp32 master weights and the optimizer step's temporaries.

Bytes of state per trainable parameter, by optimizer (``s`` = the parameter's
bytes, since torch creates states with ``zeros_like(param)``):

* ``adamw`` / ``adamw_fused`` (torch.optim.AdamW): ``exp_avg`` and
  ``exp_avg_sq``, 2·s.  The default foreach implementation also allocates
  ``torch._foreach_sqrt(exp_avg_sqs)``, one more state-sized temporary, during
  ``step()`` (torch/optim/adamw.py ``_multi_tensor_adamw``); the fused kernel
  does not.
* ``adamw_8bit`` / ``paged_adamw_8bit`` (bitsandbytes 0.50
  ``Optimizer2State``): two uint8 states plus one fp32 absmax per 256-element
  block each, 2 + 2·4/256 = 2.03125 B; tensors under ``min_8bit_size`` = 4096
  elements keep fp32 states (8 B).  Paged states (tensors ≥ 1e5 elements) live
  in CUDA unified memory and can be evicted to host RAM under pressure.
  bitsandbytes allocates them with ``cudaMallocManaged``
  (``bitsandbytes/functional.py`` ``get_paged`` → ``cget_managed_ptr``;
  ``Optimizer8bit.get_state_buffer`` pages tensors of at least 1e5 elements),
  outside PyTorch's caching allocator: nvidia-smi sees them while they are
  resident, ``torch.cuda.max_memory_allocated`` never does (``paged``).
* ``paged_adamw_32bit``: two fp32 states, 8 B whatever the parameter dtype.
* ``adafactor`` (transformers.optimization.Adafactor, ``beta1=None`` as the
  Trainer builds it): for a matrix, fp32 row and column second-moment factors,
  4·(rows + cols) per matrix; for a vector a full fp32 second moment.  Its
  step works one tensor at a time on fp32 copies: ``grad.float()``,
  ``p.float()`` (half parameters only) and two update-sized tensors.
* ``sgd``: no state (momentum 0, the Trainer's ``optim="sgd"``);
  ``sgd_momentum``: one ``momentum_buffer`` of s bytes.
* ``lion`` (bitsandbytes ``Lion``, 32-bit): one fp32 state, 4 B; ``lion_8bit``:
  1 + 4/256 B (fp32 below 4096 elements).

Master weights: DeepSpeed (and Megatron) train half-precision parameters
through a fp32 copy held by the optimizer, so Adam's K = 4 + 8 = 12 bytes per
parameter (ZeRO paper, §3).
"""
from __future__ import annotations

from dataclasses import dataclass

from .derivation import Line, line
from .dtypes import GIB, count
from .setup import Setup
from .trainable import Tensors, Trainable

BNB_BLOCK = 256
BNB_MIN_8BIT = 4096
BNB_PAGE_MIN = 100_000      # Optimizer8bit.get_state_buffer: smaller tensors are not paged


def state_bytes_per_param(optimizer: str, param_bytes: int, numel: int = 1 << 30) -> float:
    """Optimizer state bytes for one element of a tensor of ``numel`` elements."""
    small = numel < BNB_MIN_8BIT
    if optimizer in ("adamw", "adamw_fused"):
        return 2 * param_bytes
    if optimizer in ("adamw_8bit", "paged_adamw_8bit"):
        return 8 if small else 2 + 2 * 4 / BNB_BLOCK
    if optimizer == "paged_adamw_32bit":
        return 8
    if optimizer == "sgd":
        return 0
    if optimizer == "sgd_momentum":
        return param_bytes
    if optimizer == "lion":
        return 4
    if optimizer == "lion_8bit":
        return 4 if small else 1 + 4 / BNB_BLOCK
    if optimizer == "adafactor":
        return 4  # a vector's full second moment; matrices are factored, see adafactor_bytes
    raise ValueError(f"unknown optimizer {optimizer!r}")


def adafactor_bytes(group: Tensors) -> float:
    total = 0.0
    for rows, cols, n in group.shapes:
        total += 4 * (rows + cols if cols else rows) * n
    return total


def has_master(setup: Setup) -> bool:
    """A separate fp32 copy of the trained weights exists (DeepSpeed with bf16/fp16)."""
    return setup.strategy == "deepspeed" and setup.precision in ("bf16", "fp16")


@dataclass(frozen=True)
class OptimizerStates:
    states: float
    master: float
    step_workspace: float
    lines: tuple[Line, ...]
    paged: float = 0.0          # state bytes in CUDA unified memory (paged optimizers), part of ``states``

    @property
    def total(self) -> float:
        return self.states + self.master


def optimizer_states(setup: Setup, trainable: Trainable) -> OptimizerStates:
    opt = setup.optimizer
    master = has_master(setup)
    states = 0.0
    workspace = 0.0
    lines = []
    paged = 0.0
    for g in trainable.groups:
        # With a master copy the optimizer updates the fp32 copy, so its states are fp32.
        s = 4 if master else g.dtype_bytes
        if opt == "adafactor":
            b = adafactor_bytes(g)
            fp32_copies = 2 if s < 4 else 0
            workspace = max(workspace, (2 + fp32_copies) * 4 * g.largest)
            lines.append(line("optimizer.adafactor", gib=b / GIB, params=g.params, group=g.name))
        else:
            b = 0.0
            for rows, cols, n in g.shapes:
                numel = rows * (cols or 1)
                b += numel * n * state_bytes_per_param(opt, s, numel)
                if opt.startswith("paged") and numel >= BNB_PAGE_MIN:
                    # the states themselves are paged; the per-block absmax stays a torch tensor
                    paged += numel * n * (2 if opt == "paged_adamw_8bit" else 8)
            per = b / g.params if g.params else 0.0
            lines.append(line("optimizer.states", optimizer=opt, per=per, count=count(g.params), group=g.name,
                              gib=b / GIB))
            if opt == "adamw":
                workspace = max(workspace, g.params * s)
        states += b
    master_b = 4 * trainable.params if master else 0.0
    if master_b:
        lines.append(line("optimizer.master", count=count(trainable.params), gib=master_b / GIB))
    if workspace:
        why = "optimizer.foreach_sqrt" if opt == "adamw" else "optimizer.adafactor_step"
        lines.append(line(why, gib=workspace / GIB))
    return OptimizerStates(states, master_b, workspace, tuple(lines), paged)
