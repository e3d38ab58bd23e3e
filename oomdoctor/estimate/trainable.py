"""Which parameters are trained, how many, and in which dtype.

Gradients and optimizer states exist only for these, and in their dtype, so
the rest of the memory model starts here.
"""
from __future__ import annotations

import dataclasses

from dataclasses import dataclass

from . import anatomy
from .adapters import Placement, as_loaded, place
from .derivation import Line, line
from .dtypes import FLOAT_BYTES
from .setup import Setup

EMBEDDING_NAMES = {"embed_tokens", "wte", "embed_in", "tok_embeddings", "word_embeddings", "embedding"}
LM_HEAD_NAMES = {"lm_head", "embed_out", "output"}


@dataclass(frozen=True)
class Tensors:
    """Trainable tensors of one dtype: ``(rows, cols, count)``, ``cols == 0`` for a vector."""

    name: str | Line        # worded where the derivation is rendered
    dtype_bytes: int
    shapes: tuple[tuple[int, int, int], ...]

    @property
    def params(self) -> int:
        return sum(r * (c or 1) * n for r, c, n in self.shapes)

    @property
    def largest(self) -> int:
        return max((r * (c or 1) for r, c, n in self.shapes if n), default=0)


@dataclass(frozen=True)
class Trainable:
    groups: tuple[Tensors, ...]
    lines: tuple[Line, ...]
    missing_targets: tuple[str, ...] = ()
    # Extra resident copies that peft adds for modules_to_save (the originals stay frozen).
    copies: int = 0
    copies_bytes: float = 0.0
    # Parameters that require a gradient but never get one (a LLaVA tower's layers after the one it reads): in
    # the trainable count, not in ``groups``, which hold what gradients and optimizer states are kept for.
    idle: int = 0
    idle_bytes: float = 0.0

    @property
    def params(self) -> int:
        return sum(g.params for g in self.groups) + self.idle

    @property
    def bytes(self) -> float:
        return sum(g.params * g.dtype_bytes for g in self.groups)


# bnb_4bit_compute_dtype / torch_dtype in the QLoRA recipes: bf16 or fp16, 2 bytes either way.
HALF = 2


def base_float_bytes(setup: Setup) -> int:
    """Dtype of the model's float (non-quantised) parameters on the GPU.

    DeepSpeed with bf16/fp16 enabled casts the whole module to half precision
    and keeps fp32 master weights in its optimizer (``DeepSpeedEngine._configure_distributed_model``),
    so a fp32 load ends up 16-bit there.  Quantised models keep embeddings,
    norms and lm_head in 16 bits unless peft's ``prepare_model_for_kbit_training``
    upcast them to fp32.
    """
    if setup.quantized:
        return 4 if setup.kbit_fp32_upcast else HALF
    if setup.strategy == "deepspeed" and setup.precision in ("bf16", "fp16"):
        return 2
    return FLOAT_BYTES[setup.load_dtype]


def adapter_bytes(setup: Setup) -> int:
    """peft >= 0.12 upcasts bf16/fp16 adapter weights to fp32 (``autocast_adapter_dtype=True``,
    peft ``tuners_utils.cast_adapter_dtype``); DeepSpeed then casts them back to half with a
    fp32 master copy."""
    if setup.strategy == "deepspeed" and setup.precision in ("bf16", "fp16"):
        return 2
    if setup.adapter_fp32:
        return 4
    return base_float_bytes(setup)


def prefix_bytes(setup: Setup) -> int:
    """peft builds the PrefixEncoder in torch's default dtype (fp32) whatever the base's dtype, and ChatGLM's
    P-tuning v2 script calls ``prefix_encoder.float()``; DeepSpeed with bf16/fp16 casts it to half beside a
    fp32 master copy."""
    if setup.strategy == "deepspeed" and setup.precision in ("bf16", "fp16"):
        return 2
    return 4


def prefix_shapes(setup: Setup) -> tuple[tuple[int, int, int], ...]:
    """The tensors of peft's PrefixEncoder (peft/tuners/prefix_tuning/model.py).  Its token_dim is the keys'
    width, head_dim × key/value heads for grouped-query attention (``_prepare_prompt_learning_config``)."""
    d = anatomy.dims(setup.model)
    n, width, out = setup.virtual_tokens, d.kv_dim, d.layers * 2 * d.kv_dim
    if not setup.prefix_projection:
        return ((n, out, 1),)
    if chatglm_prefix(setup):
        # ChatGLM2/3's own PrefixEncoder (modeling_chatglm.py): the embedding is already layers × 2 × kv wide and
        # the MLP goes through the model's hidden size and back
        h = setup.prefix_hidden or d.hidden
        return ((n, out, 1), (h, out, 1), (h, 0, 1), (out, h, 1), (out, 0, 1))
    h = setup.prefix_hidden or width          # encoder_hidden_size, token_dim when not given
    return ((n, width, 1), (h, width, 1), (h, 0, 1), (out, h, 1), (out, 0, 1))


def chatglm_prefix(setup: Setup) -> bool:
    """ChatGLM2/3 (multi-query groups: keys narrower than the hidden size) build the prefix in their own code.
    ChatGLM-6B's encoder is peft's with encoder_hidden_size = hidden size."""
    d = anatomy.dims(setup.model)
    return d.model_type == "chatglm" and d.kv_dim < d.hidden


def _full_shapes(shape, layers_fraction: float = 1.0, with_ends: bool = True,
                 frozen_tower: bool = False) -> list[tuple[int, int, int]]:
    out = []
    for b in anatomy.blocks(shape):
        count = round(b.count * layers_fraction)
        out.append((b.d_out, b.d_in, count))
        if b.bias:
            out.append((b.d_out, 0, count))
    d = anatomy.dims(shape)
    norms_per_layer = (shape.norm_params() - d.hidden) // d.layers
    if with_ends:
        out.append((d.vocab, d.hidden, 1))
        if shape.lm_head_params():
            out.append((d.vocab, d.hidden, 1))
        out.append((shape.norm_params(), 0, 1))
        # everything else the model holds: position tables, attention sinks, relative position biases, a vision
        # tower (its linears and the rest), narrower embeddings' corrections
        rest = anatomy.total_params(shape) - sum(r * (c or 1) * n for r, c, n in out)
        vision = getattr(shape, "vision", None)
        if vision is not None and frozen_tower:
            # the tower leaves the trained weights; its projector (and LLaVA-NeXT's image_newline) stays
            rest -= vision.params
            if vision.projector_params:
                out.append((vision.projector_params, 0, 1))
        elif vision is not None:
            for lin in vision.linears:
                count = lin.count - (vision.idle_layers if lin.count == vision.layers and lin.kind == "vision" else 0)
                out.append((lin.d_out, lin.d_in, count))
                rest -= lin.d_out * lin.d_in * lin.count
            # the layers LLaVA does not read, and its final norm, never get a gradient (see ``idle``)
            rest -= vision.idle_params - _idle_weights(vision)
        if rest:
            out.append((rest, 0, 1))
    else:
        out.append((norms_per_layer, 0, round(d.layers * layers_fraction)))
    return out


def _idle_weights(tower) -> int:
    """The weight matrices of a tower's idle layers (and its pooling head), already left out of the shapes."""
    if not tower.idle_params:
        return 0
    return sum(l.d_out * l.d_in * (tower.idle_layers if l.count == tower.layers else 1) for l in tower.linears
               if l.kind == "vision" and (l.count == tower.layers or l.count == 1))


def _idle_adapters(setup: Setup, placed: Placement) -> tuple[dict[tuple[str, int, int], int], int]:
    """LoRA adapters on a tower's idle layers: {(name, d_in, d_out): idle layers} and their parameters."""
    tower = getattr(setup.model, "vision", None)
    if tower is None or not tower.idle_layers:
        return {}, 0
    mine = {(l.name, l.d_in, l.d_out) for l in tower.linears if l.kind == "vision" and l.count == tower.layers}
    idle, n = {}, 0
    for a in placed.adapters:
        if (a.name, a.d_in, a.d_out) in mine and a.count == tower.layers:
            idle[(a.name, a.d_in, a.d_out)] = tower.idle_layers
            n += a.rank * a.experts * (a.d_in + a.d_out) * tower.idle_layers
    return idle, n


def _saved_module_shapes(shape, names: tuple[str, ...]) -> tuple[list[tuple[int, int, int]], list[str]]:
    d = anatomy.dims(shape)
    shapes, unknown = [], []
    by_name = {b.name: b for b in anatomy.blocks(shape)}
    for name in names:
        leaf = name.split(".")[-1]
        if leaf in EMBEDDING_NAMES or leaf in LM_HEAD_NAMES:
            shapes.append((d.vocab, d.hidden, 1))
        elif leaf == "score":
            shapes.append((1, d.hidden, 1))
        elif leaf in by_name:
            b = by_name[leaf]
            shapes.append((b.d_out, b.d_in, b.count))
        else:
            unknown.append(name)
    return shapes, unknown


def adapters_for(setup: Setup) -> Placement:
    """The LoRA adapters peft builds for this set-up (see ``adapters``).  A frozen vision tower gets none: LLaMA-Factory
    (freeze_vision_tower) and ms-swift (freeze_vit) leave its modules out of the targets; its projector keeps them."""
    shape = as_loaded(setup.model, setup.quantized)
    tower = getattr(shape, "vision", None)
    if tower is not None and setup.freeze_vision and hasattr(shape, "replace"):
        kept = tuple(l for l in tower.linears if l.kind != "vision")
        shape = shape.replace(vision=dataclasses.replace(tower, linears=kept))
    return place(shape, setup.lora_targets, setup.lora_rank)


def trainable(setup: Setup) -> Trainable:
    shape = setup.model
    d = anatomy.dims(shape)
    if setup.method == "full":
        dt = base_float_bytes(setup)
        vision = getattr(shape, "vision", None)
        frozen = bool(vision is not None and setup.freeze_vision)
        group = Tensors(line("group.all_weights"), dt, tuple(_full_shapes(shape, frozen_tower=frozen)))
        idle = 0 if frozen or vision is None else vision.idle_params
        said = [line("trainable.full", params=group.params + idle, bytes=dt)]
        if frozen:
            said.append(line("trainable.vision_frozen", params=vision.params - vision.projector_params,
                             projector=vision.projector_params))
        elif idle:
            said.append(line("trainable.idle_layers", params=idle, layers=vision.idle_layers))
        return Trainable((group,), tuple(said), idle=idle, idle_bytes=idle * dt)
    if setup.method == "freeze":
        n = min(setup.freeze_trainable_layers, d.layers)
        dt = base_float_bytes(setup)
        group = Tensors(line("group.last_layers", n=n), dt, tuple(_full_shapes(shape, n / d.layers, with_ends=False)))
        return Trainable((group,), (line("trainable.freeze", n=n, layers=d.layers, params=group.params, bytes=dt),))
    if setup.method == "prefix":
        d = anatomy.dims(setup.model)
        dt = prefix_bytes(setup)
        group = Tensors(line("group.prefix"), dt, prefix_shapes(setup))
        if setup.prefix_projection and chatglm_prefix(setup):
            said = line("trainable.prefix_chatglm", n=setup.virtual_tokens, kv=d.kv_dim,
                        hidden=setup.prefix_hidden or d.hidden, layers=d.layers, params=group.params, bytes=dt)
        elif setup.prefix_projection:
            said = line("trainable.prefix_projection", n=setup.virtual_tokens, kv=d.kv_dim,
                        hidden=setup.prefix_hidden or d.kv_dim, layers=d.layers, params=group.params, bytes=dt)
        else:
            said = line("trainable.prefix", n=setup.virtual_tokens, kv=d.kv_dim, layers=d.layers,
                        params=group.params, bytes=dt)
        return Trainable((group,), (said,))
    r = setup.lora_rank
    ab = adapter_bytes(setup)
    placed = adapters_for(setup)
    missing = list(placed.missing)
    shapes, parts = [], []
    idle_at, idle = _idle_adapters(setup, placed)
    tower_layers = getattr(getattr(shape, "vision", None), "layers", -1)
    for a in placed.adapters:
        n = a.count - (idle_at.get((a.name, a.d_in, a.d_out), 0) if a.count == tower_layers else 0)
        shapes += [(a.rank * a.experts, a.d_in, n), (a.d_out, a.rank * a.experts, n)]
        how = f"{a.rank}·{a.experts}·" if a.experts > 1 else f"{a.rank}·"
        parts.append(f"{a.name} {how}({a.d_in}+{a.d_out})×{a.count}")
    adapters = Tensors(line("group.adapters"), ab, tuple(shapes))
    on = sorted(a.name for a in placed.adapters)
    lines = [line("trainable.lora", r=r, targets=", ".join(on) or line("trainable.no_module"),
                  parts=" + ".join(parts) or "0", params=adapters.params + idle, bytes=ab)]
    if idle:
        lines.append(line("trainable.idle_layers", params=idle, layers=shape.vision.idle_layers))
    if placed.experts_wrapped:
        lines.append(line("trainable.experts_wrapped"))
    if placed.untouched:
        lines.append(line("trainable.moe_untouched", names=", ".join(placed.untouched)))
    if placed.conflict is not None:
        lines.append(line("trainable.refused", why=placed.conflict))
    groups = [adapters]
    copies = 0
    copies_bytes = 0.0
    if setup.modules_to_save:
        mts, unknown = _saved_module_shapes(shape, setup.modules_to_save)
        missing = missing + unknown
        dt = base_float_bytes(setup)
        if mts:
            saved = Tensors(line("group.modules_to_save"), dt, tuple(mts))
            groups.append(saved)
            copies, copies_bytes = saved.params, saved.params * dt
            lines.append(line("trainable.modules_to_save", names=", ".join(setup.modules_to_save),
                              params=saved.params, bytes=dt))
    return Trainable(tuple(groups), tuple(lines), tuple(missing), copies, copies_bytes, idle, idle * ab)
