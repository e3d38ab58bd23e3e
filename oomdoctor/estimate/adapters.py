"""Where peft puts LoRA adapters, and how large they are (peft 0.21 on transformers 5).

``target_modules`` matches ``nn.Linear`` modules by the last part of their name;
``"all-linear"`` means every ``nn.Linear`` but the output layer.  Two things of
transformers 5 change that for Mixture-of-Experts models:

* the routed experts are no longer modules: each MoE layer keeps them in two 3-D
  parameters, ``experts.gate_up_proj`` (E, 2I, h) and ``experts.down_proj``
  (E, h, I), and most routers are custom modules holding a plain ``weight``;
* for the model types transformers lists as converted from the Mixtral or the
  Qwen2-MoE checkpoint layout (``conversion_mapping._MODEL_TO_CONVERSION_PATTERN``,
  plus ``mixtral`` itself in peft), peft rewrites the config before injecting
  (``peft.utils.transformers_weight_conversion._convert_peft_config_moe``): the
  transformers 4 names ``gate``, ``w1``/``w3`` or ``gate_proj``/``up_proj`` and
  ``w2`` or ``down_proj`` (all of them under ``all-linear``) become
  ``target_parameters`` ``gate.weight``, ``gate_up_proj`` (rank 2r, since two
  matrices were fused) and ``down_proj``, and leave ``target_modules``.  So the
  dense MLPs and shared experts, whose modules are still called
  ``gate_proj``/``up_proj``/``down_proj``, get no adapter at all.

A ``lora.ParamWrapper`` on a 3-D parameter holds ``lora_A`` (r·E × d_in) and
``lora_B`` (d_out × r·E): r·E·(d_in + d_out) parameters, the same as one adapter
per expert.  In the forward pass it adds B·A to the whole stack once per
layer (``torch.baddbmm``), and the experts' matmuls keep that merged copy for
backward (``activations``); it refuses ``lora_dropout`` > 0.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from .derivation import Line, line

ALL_LINEAR = "all-linear"

# model_type -> the checkpoint layout transformers converts it from (MoE types only).
MIXTRAL_PATTERN = frozenset({"mixtral", "minimax", "minimax_m2"})
QWEN2_MOE_PATTERN = frozenset({
    "deepseek_v2", "deepseek_v3", "deepseek_v32", "dots1", "ernie4_5_moe", "glm4_moe", "glm4_moe_lite",
    "glm4v_moe", "qwen3_moe", "qwen3_next", "qwen3_omni_moe", "hunyuan_v1_moe", "flex_olmo", "olmoe",
    "longcat_flash", "afmoe", "exaone_moe", "cohere2_moe", "qwen3_vl_moe",
})
# transformers 4 module names -> the transformers 5 parameter peft targets instead.
MOE_TARGET_MAPPING = {
    "mixtral": {"gate": "gate.weight", "w1": "gate_up_proj", "w3": "gate_up_proj", "w2": "down_proj"},
    "qwen2_moe": {"gate": "gate.weight", "gate_proj": "gate_up_proj", "up_proj": "gate_up_proj",
                  "down_proj": "down_proj"},
}
FUSED = {"mixtral": ("w1", "w3"), "qwen2_moe": ("gate_proj", "up_proj")}
# Model types whose fused experts transformers turns back into one nn.Linear MLP per expert when bitsandbytes
# quantises the model (quantizers/base.py MODULES_TO_PATCH_FOR_QUANTIZATION: Llama4TextExperts ->
# SequentialLlama4TextExperts); every other MoE keeps its 3-D parameters, which bitsandbytes leaves unquantised.
BNB_UNFUSED_TYPES = frozenset({"llama4_text"})
# Routers that are nn.Linear modules (all-linear reaches them); the others hold a bare weight.
LINEAR_ROUTER_TYPES = frozenset({"phimoe", "llama4_text"})


@dataclass(frozen=True)
class Adapter:
    """LoRA on one kind of module or parameter: ``count`` instances of r·experts·(d_in + d_out)."""

    name: str
    d_in: int
    d_out: int
    rank: int
    count: int
    experts: int = 1          # > 1: a ParamWrapper over a 3-D expert parameter
    kind: str = "module"      # module | parameter

    @property
    def params(self) -> int:
        return self.rank * self.experts * (self.d_in + self.d_out) * self.count


@dataclass(frozen=True)
class Placement:
    adapters: tuple[Adapter, ...]
    modules: frozenset[str]           # nn.Linear names that carry an adapter
    missing: tuple[str, ...]          # requested names the model does not have
    experts_wrapped: bool             # routed experts carry ParamWrapper adapters
    untouched: tuple[str, ...] = ()   # module names all-linear would have reached but peft's MoE rewrite drops
    conflict: Line | None = None      # a request peft refuses (half of a fused pair, a custom router)

    @property
    def params(self) -> int:
        return sum(a.params for a in self.adapters)


def as_loaded(shape: Any, quantized: bool) -> Any:
    """The shape as the model is built for a bitsandbytes load (see ``BNB_UNFUSED_TYPES``)."""
    if quantized and getattr(shape, "experts", 0) and getattr(shape, "model_type", "") in BNB_UNFUSED_TYPES \
            and hasattr(shape, "replace"):
        return shape.replace(experts_fused=False)
    return shape


def pattern(shape: Any) -> str | None:
    """The transformers 4 layout peft converts this model's targets from, or None."""
    mt = str(getattr(shape, "model_type", "") or "")
    if not getattr(shape, "experts", 0) or not getattr(shape, "experts_fused", True):
        return None
    if mt in MIXTRAL_PATTERN:
        return "mixtral"
    if mt in QWEN2_MOE_PATTERN:
        return "qwen2_moe"
    return None


def _linears(shape: Any) -> list[Any]:
    """The language model's linear layers, then a vision tower's (peft's all-linear reaches both)."""
    vision = getattr(shape, "vision", None)
    return list(shape.linear_layers()) + (list(vision.linears) if vision is not None else [])


def module_names(shape: Any) -> list[str]:
    """Names of the nn.Linear modules ``all-linear`` reaches, in model order (lm_head left out)."""
    mt = str(getattr(shape, "model_type", "") or "")
    router = getattr(shape, "router_name", None)
    fused = getattr(shape, "experts_fused", True)     # transformers 4 had one nn.Linear per expert
    names: list[str] = []
    for lin in _linears(shape):
        kind = getattr(lin, "kind", None)
        if kind == "expert" and fused:
            continue                          # 3-D parameters, not modules
        if kind == "router" and lin.name == router and mt not in LINEAR_ROUTER_TYPES and fused:
            continue                          # a custom router module holding a bare weight
        if lin.name not in names:
            names.append(lin.name)
    return names


def place(shape: Any, targets: Iterable[str], rank: int) -> Placement:
    """The adapters peft builds for ``target_modules=targets`` with rank ``rank``."""
    targets = [str(t) for t in targets]
    all_linear = any(t == ALL_LINEAR for t in targets)
    known = module_names(shape)
    wanted = set(known) if all_linear else {t.split(".")[-1] for t in targets}
    pat = pattern(shape)
    params: set[str] = set()
    conflict = None
    untouched: list[str] = []
    if pat:
        mapping = MOE_TARGET_MAPPING[pat]
        if all_linear:
            wanted |= set(mapping)
        for old, new in mapping.items():
            if old in wanted:
                params.add(new)
        present = [n for n in FUSED[pat] if n in wanted]
        if 0 < len(present) < 2:
            conflict = line("trainable.conflict_fused", name=present[0],
                            other=[n for n in FUSED[pat] if n not in present][0])
        untouched = [n for n in known if n in mapping and n in wanted]
        wanted -= set(mapping)
    router = getattr(shape, "router_name", None)
    mt = str(getattr(shape, "model_type", "") or "")
    if not all_linear and router in wanted and mt not in LINEAR_ROUTER_TYPES and getattr(shape, "experts", 0) \
            and getattr(shape, "experts_fused", True) and conflict is None:
        conflict = line("trainable.conflict_router", router=router)
    modules = {n for n in wanted if n in known}
    missing = [] if all_linear else sorted(
        t for t in {x.split(".")[-1] for x in targets}
        if t not in known and not (pat and t in MOE_TARGET_MAPPING[pat]) and t != router)
    adapters: list[Adapter] = []
    fused = getattr(shape, "experts_fused", True)
    for lin in _linears(shape):
        kind = getattr(lin, "kind", None)
        if (kind != "expert" or not fused) and lin.name in modules and lin.name in known:
            adapters.append(Adapter(lin.name, lin.d_in, lin.d_out, rank, lin.count))
    wrapped = False
    if params and conflict is None:
        E = int(getattr(shape, "experts", 0) or 0)
        moe_layers = int(getattr(shape, "n_moe_layers", 0) or 0)
        h = shape.hidden
        width = getattr(shape, "moe_intermediate", 0) or shape.intermediate
        if "gate.weight" in params:
            adapters.append(Adapter("gate.weight", h, E, rank, moe_layers, 1, "parameter"))
        if "gate_up_proj" in params:
            adapters.append(Adapter("experts.gate_up_proj", h, 2 * width, 2 * rank, moe_layers, E, "parameter"))
            wrapped = True
        if "down_proj" in params:
            adapters.append(Adapter("experts.down_proj", width, h, rank, moe_layers, E, "parameter"))
            wrapped = True
    return Placement(tuple(adapters), frozenset(modules), tuple(missing), wrapped, tuple(untouched), conflict)
