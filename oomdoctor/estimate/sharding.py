"""How data parallelism, ZeRO and FSDP divide model states over GPUs and host RAM.

ZeRO (Rajbhandari et al. 2020, arXiv:1910.02054, §5 and Figure 1), per GPU
over N data-parallel ranks, with 2 B half weights, 2 B half gradients and K B
of optimizer state (K = 12 for mixed-precision Adam: fp32 master, m, v):

* stage 1 (P_os):      2Ψ + 2Ψ + KΨ/N
* stage 2 (P_os+g):    2Ψ + (2 + K)Ψ/N
* stage 3 (P_os+g+p):  (2 + 2 + K)Ψ/N

DeepSpeed's own estimators (``estimate_zero2_model_states_mem_needs``,
``estimate_zero3_model_states_mem_needs`` in deepspeed 0.19) count 4 more bytes
per parameter for the fp32 gradient partition the optimizer steps with
("18 = 2 grads16 + 4 grads32 + 4 params32 + 8 optimizer states"); it is
added here at the optimizer step.  Stage 3 computes on gathered layers: the
current layer and the prefetched next one in half precision, and one layer's
full gradients before they are reduce-scattered.  With CPU offload the master
weights, states and fp32 gradients live in pinned host memory, which DeepSpeed
sizes with ``additional_buffer_factor = 1.5``; ``offload_param`` (stage 3) moves
the half weights there too.

FSDP ``FULL_SHARD`` is ZeRO-3 with the same gathering, except that the root
unit (what the decoder-layer wrapping leaves over: embeddings, final norm,
lm_head) is not resharded after forward and stays whole through backward;
its CPU offload moves parameters, gradients and the optimizer step to the
host, and the gathered units (the root among them) still compute on the GPU.

Quantised weights (QLoRA with ``bnb_4bit_quant_storage`` set so FSDP / ZeRO-3
can shard them) are sharded and gathered as their packed codes, half a byte
per NF4 weight, not at 16 bits; their quantisation constants (``quant_state``:
absmax and the nested statistics, or LLM.int8's row scales) are module
attributes, not parameters, so every rank keeps all of them.

FSDP1 units that hold frozen weights beside trainable adapters
(decoder-layer wrapping without peft's ``fsdp_auto_wrap_policy``, possible only
with ``use_orig_params=True``: ``FlatParamHandle._validate_tensors_to_flatten``
in ``torch/distributed/fsdp/_flat_param.py`` refuses mixed ``requires_grad``
otherwise) give the frozen weights gradients: the unit's ``FlatParameter``
requires grad when any of its parameters does (the same function ORs
``requires_grad``; ``_reset_flat_param_grad_info_if_needed`` keeps it so), and
in forward every original parameter, frozen or not, is a view of it
(``_use_unsharded_views``), so autograd produces the whole unit's unsharded
gradient (``prepare_gradient_for_backward``), which is reduce-scattered into a
sharded gradient of the whole unit in the flat parameter's dtype and kept
until ``zero_grad`` (``_use_sharded_grad_views`` only hides the frozen part
from ``.grad``).  Per GPU that is the decoder layers' weights as stored,
divided by N, on top of the adapters' own, and one unit's unsharded gradient
while it is reduce-scattered.  A bitsandbytes 4-bit weight gets no gradient
of its own (``MatMul4Bit.backward``), but its slot in the flat gradient is
reduced and kept all the same.  Measured on CPU (``bench/accuracy/
fsdp_probe.py --mixed-units``, two gloo ranks): rank 0 kept exactly half of
the decoder layers' bytes.  FSDP2 (``fully_shard``) does not do this: each
parameter is its own sharded DTensor that keeps its ``requires_grad``
(``torch/distributed/fsdp/_fully_shard/_fsdp_param.py``,
``FSDPParam._init_sharded_param`` and ``init_unsharded_param``), and
``FSDPParamGroup.post_backward`` (``_fsdp_param_group.py``) reduce-scatters
only the parameters that received a gradient.

DDP keeps a full replica and, with ``gradient_as_bucket_view=False`` (the
default, as accelerate passes it), communication buckets holding a second copy
of every gradient (torch DistributedDataParallel docs: the saving of
``gradient_as_bucket_view=True`` "will be equal to the total gradients size").
"""
from __future__ import annotations

from dataclasses import dataclass

from .derivation import Line, line
from .dtypes import GIB, count
from .setup import Setup

DS_BUFFER_FACTOR = 1.5          # deepspeed estimate_zero*_model_states_mem_needs(additional_buffer_factor)
HF_ALLGATHER_BUCKET = 2e8       # transformers DeepSpeed docs' ZeRO-2 sample config (elements)


@dataclass(frozen=True)
class ModelStates:
    """Bytes on one unsharded replica."""

    weights: float          # all resident weights, frozen and trained
    grads: float
    states: float           # optimizer states
    master: float
    workspace: float        # the optimizer step's temporaries
    frozen_copies: float    # reference / reward models
    trainable_params: int
    layer_params: int       # one decoder layer, for gathering under ZeRO-3 / FSDP
    total_params: int
    hidden: int
    half: int               # bytes of the dtype layers are gathered in
    layer_bytes: float | None = None    # one layer as gathered (quantised codes); default layer_params × half
    replicated: float = 0.0             # weight bytes every rank keeps whole (quantisation constants)
    root_bytes: float = 0.0             # FSDP's root unit (embeddings, final norm, lm_head) as gathered
    mixed_units: float = 0.0            # frozen decoder-layer weights as stored, when FSDP units mix them with
                                        # adapters: they get gradients of the same size

    @property
    def gathered_layer(self) -> float:
        return self.layer_bytes if self.layer_bytes is not None else self.layer_params * self.half


@dataclass(frozen=True)
class PerGpu:
    weights: float          # resident shard / replica
    gathered: float         # extra during forward and backward only
    grads: float
    grad_buffers: float     # buckets, gathered gradients
    optimizer: float        # states + master
    step_extra: float       # during the optimizer step only
    host: float             # pinned host memory of offloaded states (all ranks together)
    lines: tuple[Line, ...]
    # Buffers allocated and freed every layer on a side stream (ZeRO-3 / FSDP): the two gathered layers and one
    # layer's gradients on their way to the reduce-scatter.  What the caching allocator reserves for them beyond
    # the allocated peak is ``overhead.SIDE_STREAM_RESERVE`` times these bytes.
    side_stream: float = 0.0


def zero_model_states(psi: float, n: int, stage: int, k: float = 12, weight_bytes: float = 2,
                      grad_bytes: float = 2) -> float:
    """Model-state bytes per GPU in the ZeRO paper's form (Figure 1)."""
    if stage == 0:
        return (weight_bytes + grad_bytes + k) * psi
    if stage == 1:
        return weight_bytes * psi + grad_bytes * psi + k * psi / n
    if stage == 2:
        return weight_bytes * psi + (grad_bytes + k) * psi / n
    if stage == 3:
        return (weight_bytes + grad_bytes + k) * psi / n
    raise ValueError(f"ZeRO stage must be 0-3, got {stage}")


def per_gpu(setup: Setup, m: ModelStates) -> PerGpu:
    n = setup.num_gpus
    opt = m.states + m.master
    lines: list[Line] = []
    if setup.strategy == "deepspeed":
        return _deepspeed(setup, m, n, opt, lines)
    if setup.strategy == "fsdp" and n >= 1:
        return _fsdp(setup, m, n, opt, lines)
    buckets = 0.0
    if setup.strategy in ("ddp", "single") and n > 1 and m.grads:
        buckets = m.grads
        lines.append(line("sharding.ddp_buckets", gib=buckets / GIB))
    return PerGpu(m.weights + m.frozen_copies, 0.0, m.grads, buckets, opt, m.workspace, 0.0, tuple(lines))


def _deepspeed(setup: Setup, m: ModelStates, n: int, opt: float, lines: list[Line]) -> PerGpu:
    stage = setup.zero_stage
    shard = n if stage >= 1 else 1
    weights = m.weights + m.frozen_copies
    gathered = 0.0
    grads = m.grads
    buffers = 0.0
    host = 0.0
    fp32_grads = 4 * m.trainable_params / shard
    if stage >= 2:
        grads = m.grads / n
        buffers = m.hidden ** 2 * m.half   # reduce_bucket_size "auto" = hidden² in the HF integration
    if stage in (1, 2):
        buffers += HF_ALLGATHER_BUCKET * m.half
    if stage == 3:
        weights = (weights - m.replicated) / n + m.replicated
        gathered = 2 * m.gathered_layer
        buffers += _layer_grads(m)
        lines.append(line("sharding.zero3_gathered", params=m.layer_params, gib=gathered / GIB))
    optimizer = opt / shard
    workspace = m.workspace / shard
    if stage >= 1:
        lines.append(line(f"sharding.zero{stage}", n=n))
    if setup.offload_optimizer != "none" and stage >= 1:
        pinned = (opt + 4 * m.trainable_params) * DS_BUFFER_FACTOR
        host += pinned if setup.offload_optimizer == "cpu" else 0.0
        lines.append(line(f"sharding.offload_optimizer_{setup.offload_optimizer}",
                          gib=(opt + 4 * m.trainable_params) / GIB, factor=DS_BUFFER_FACTOR))
        optimizer, workspace, fp32_grads = 0.0, 0.0, 0.0
    if setup.offload_param != "none" and stage == 3:
        if setup.offload_param == "cpu":
            host += (m.weights + m.frozen_copies - m.replicated) * DS_BUFFER_FACTOR
        lines.append(line("sharding.offload_param", to=setup.offload_param))
        weights = m.replicated
    side = gathered + buffers if stage == 3 else 0.0
    if fp32_grads:
        lines.append(line("sharding.fp32_grads", count=count(m.trainable_params),
                          shard=f" / {shard}" if shard > 1 else "", gib=fp32_grads / GIB))
    return PerGpu(weights, gathered, grads, buffers, optimizer, workspace + fp32_grads, host, tuple(lines), side)


def _fsdp(setup: Setup, m: ModelStates, n: int, opt: float, lines: list[Line]) -> PerGpu:
    weights = (m.weights + m.frozen_copies - m.replicated) / n + m.replicated
    grads = m.grads + m.mixed_units
    if m.mixed_units:
        lines.append(line("sharding.fsdp_mixed_units", n=n, gib=m.mixed_units / n / GIB))
    if n == 1 and setup.offload_param == "none" and setup.offload_optimizer == "none":
        # One rank: FSDP switches to NO_SHARD and gathers nothing; only MixedPrecision's half copy of a fp32
        # unit exists while the unit computes (freed at its reshard), the current one and the prefetched one.
        cast = 2 * m.layer_params * m.half if setup.load_dtype == "fp32" and m.half == 2 else 0.0
        lines.append(line("sharding.fsdp_one_gpu", cast=line("sharding.fsdp_cast", gib=cast / GIB) if cast else ""))
        return PerGpu(weights, cast, grads, 0.0, opt, m.workspace, 0.0, tuple(lines))
    # The root unit is not resharded after forward (torch.distributed.fsdp._runtime_utils._post_forward_reshard:
    # "Do not free the root's parameters in the post-forward"), so it stays whole until backward is over.
    root = m.root_bytes
    gathered = 2 * m.gathered_layer + root
    # a mixed unit's unsharded gradient is the whole unit, in the dtype it was gathered in
    unit_grads = max(_layer_grads(m), m.gathered_layer if m.mixed_units else 0.0)
    lines.append(line("sharding.fsdp", n=n, gib=2 * m.gathered_layer / GIB,
                      root=line("sharding.fsdp_root", gib=root / GIB) if root else ""))
    # the root is gathered once and freed once a step, the same blocks each time: not churned with the layers
    side = gathered - root + unit_grads
    if setup.offload_param != "none" or setup.offload_optimizer != "none":
        host = m.weights + m.frozen_copies + grads + opt + m.workspace
        lines.append(line("sharding.fsdp_offload", gib=host / GIB))
        # quantisation constants are module attributes, not parameters: CPUOffload leaves them on the GPU
        return PerGpu(m.replicated, gathered, 0.0, unit_grads, 0.0, 0.0, host - m.replicated, tuple(lines), side)
    return PerGpu(weights, gathered, grads / n, unit_grads, opt / n, m.workspace / n, 0.0, tuple(lines), side)


def _layer_grads(m: ModelStates) -> float:
    """One layer's gradients before they are reduce-scattered (its share of all gradients)."""
    return m.grads * m.layer_params / max(m.total_params, 1)
