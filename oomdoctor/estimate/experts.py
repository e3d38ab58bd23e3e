"""What LoRA on fused expert weights keeps alive (peft ``lora.ParamWrapper`` on transformers 5 MoE).

A ParamWrapper does not run an adapter beside the expert matmuls.  For the
whole forward of the experts module it registers a parametrization whose value
is ``W + scaling·B·A`` for the entire (E, d_out, d_in) stack, computed once
(``torch.baddbmm`` under ``nn.utils.parametrize.cached()``, in the weight's
dtype).  Each expert's ``F.linear`` reads a slice of that merged tensor, which
needs a gradient (through A and B), so autograd keeps the slice, and with it the
whole merged stack, until the layer's backward; and it keeps each expert's input
for the merged weight's gradient, as if the expert weights trained.  In backward
the gradient of the merged stack is materialised whole, one parameter at a time,
before it is reduced to A's and B's.  A router targeted as ``gate.weight`` is a
2-D ParamWrapper: a merged (E, h) copy, and the router keeps its input.

Measured on CPU (``bench/accuracy/measure_grid.py``, Mixtral cells with
``all-linear``): the merged stacks are what separates that cell from the
attention-only one.
"""
from __future__ import annotations

from dataclasses import dataclass

from .derivation import Line, line
from .setup import Setup
from .trainable import adapter_bytes, adapters_for, base_float_bytes


@dataclass(frozen=True)
class Wrapped:
    experts: bool = False           # the routed experts carry ParamWrapper adapters
    router: bool = False            # so does the router's weight
    merged_bytes: float = 0.0       # the merged copies one MoE layer keeps for backward
    largest_grad: float = 0.0       # what the merged stacks' gradients add at the worst moment of backward
    cast_bytes: float = 0.0         # one layer's A and B cast to the weight's dtype (fp32 adapters, 16-bit weights)

    @property
    def any(self) -> bool:
        return self.experts or self.router


def wrapped(setup: Setup) -> Wrapped:
    """The ParamWrapper adapters of a LoRA set-up on an MoE model, and the bytes they keep per layer."""
    if not setup.adapters or not getattr(setup.model, "experts", 0):
        return Wrapped()
    placed = adapters_for(setup)
    if not any(a.kind == "parameter" for a in placed.adapters):
        return Wrapped()
    wb = base_float_bytes(setup) if not setup.quantized else 2
    wrapped_adapters = [a for a in placed.adapters if a.kind == "parameter"]
    size = {a.name: a.experts * a.d_in * a.d_out * wb for a in wrapped_adapters}
    # Backward reaches down_proj first: its merged gradient appears while gate_up's merged copy is still held;
    # gate_up's gradient comes after down's merged copy has been freed.
    down, gate_up = size.get("experts.down_proj", 0), size.get("experts.gate_up_proj", 0)
    grad = max(down, gate_up - down, size.get("gate.weight", 0))
    cast = 0.0
    if adapter_bytes(setup) != wb:
        # get_delta_factors casts A and B to the weight's dtype before baddbmm
        cast = sum(a.params for a in wrapped_adapters) / max(1, wrapped_adapters[0].count) * wb
    return Wrapped(
        experts=placed.experts_wrapped,
        router="gate.weight" in size,
        merged_bytes=float(sum(size.values())), largest_grad=float(grad), cast_bytes=float(cast),
    )


def merged_line(w: Wrapped, layers: int, checkpointing: bool) -> Line:
    held = line("activations.merged_one_layer") if checkpointing else line("activations.merged_layers", layers=layers)
    return line("activations.merged_experts", mib=w.merged_bytes / 2**20, held=held, grad_mib=w.largest_grad / 2**20)


def load_balancing_bytes(setup: Setup, tokens: int) -> float:
    """With ``output_router_logits`` the auxiliary load-balancing loss runs a softmax over every MoE layer's router
    logits and keeps its output for backward (transformers' ``load_balancing_loss_func``): tokens × experts in the
    logits' dtype, per MoE layer (measured on CPU: the whole difference it makes)."""
    shape = setup.model
    if not getattr(shape, "output_router_logits", False) or not getattr(shape, "experts", 0):
        return 0.0
    from .activations import compute_dtypes
    p, _, _ = compute_dtypes(setup)
    return float(tokens * shape.experts * p * shape.n_moe_layers)
