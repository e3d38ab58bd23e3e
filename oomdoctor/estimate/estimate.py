"""Peak GPU memory of one training step, and host RAM, for a set-up.

Memory is not the sum of everything the job ever holds.  The figure is the
largest of the step's moments, each summing only what is alive then:

* end of forward: weights, optimizer states (alive from the first step on),
  gradients only while accumulating (``zero_grad(set_to_none=True)`` frees them
  after each optimizer step), every activation kept for backward, and the
  larger of the loss's forward working set over the logits and the last
  layer's attention transient (they come one after the other);
* start of backward: the same, with the loss gradient over the logits at its
  12 B/token/vocab peak, or, when lm_head trains and that is larger, the
  logits' gradient beside lm_head's weight gradient (which only exists once
  the loss's own tensors are gone), or, under gradient checkpointing, one
  recomputed layer plus the gradients flowing through it;
* end of backward: all gradients, activations freed; with tied embeddings the
  embedding's and lm_head's shares of one gradient are summed into a third
  tensor here;
* optimizer step: weights, gradients, states and the step's temporaries;
* evaluation, when an eval batch size is known: a no-grad forward's logits;
* rollouts, for RL objectives: generating the completions the next steps train
  on, beside the weights and optimizer states (``rollout``); a colocated vLLM
  that never sleeps holds its share of the card through every other moment too.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from . import anatomy, parallel
from .activations import activations, compute_dtypes
from .derivation import Line, line, text
from .dtypes import GIB, count
from .evaluation import evaluates, evaluation
from .fp8 import fp8
from .logits import logits
from .objectives import objective
from .offload import offloaded
from .optimizer import has_master, optimizer_states
from .objectives import DEFAULT_BETA
from .rollout import TRL_COMPLETION, generates, lengths, rollout
from .overhead import ALLOCATOR_RESERVE, CUDA_CONTEXT_GIB, HOST_PROCESS_GIB, SIDE_STREAM_RESERVE
from .setup import Setup
from .sharding import ModelStates, per_gpu
from .trainable import trainable
from .trainable import base_float_bytes
from .weights import quantized_bytes, weights

# The moments of a training step (evaluation and generation come between steps).
TRAINING_MOMENTS = ("end of forward", "start of backward", "end of backward", "optimizer step")
COMPONENTS = ("weights", "gradients", "optimizer", "activations", "logits", "rollouts", "overhead")


@dataclass(frozen=True)
class Estimate:
    per_gpu_gib: float          # compare with nvidia-smi's "used"
    allocated_gib: float        # compare with torch.cuda.max_memory_allocated()
    reserved_gib: float         # compare with torch.cuda.max_memory_reserved()
    host_ram_gib: float
    breakdown: dict[str, float]
    peak_moment: str
    trainable_params: int
    total_params: int
    fits: bool | None
    headroom_gib: float | None
    limiter: str
    derivation: list[Line]     # keyed lines, worded in the reader's language where the estimate is rendered
    assumptions: list["Assumed"]
    moments: dict[str, float] = field(default_factory=dict)
    weights_gib: float = 0.0    # resident weights per GPU, for "the weights alone exceed the card"
    # One decoder layer's weights unsharded, in the dtype they are stored in: what FSDP or ZeRO-3 gathers per layer.
    layer_gib: float = 0.0
    fp32_master: bool = False
    gpu_memory_gib: float | None = None
    # Evaluation's kept predictions: what one step adds (GiB) and how many steps are held; None when unbounded
    # (no eval set size, no eval_accumulation_steps), so only one step is counted.
    eval_step_gib: float | None = None
    eval_steps_held: int | None = None
    # Vision-language models: the tower's activations count (it trains or carries adapters), and its image
    # tokens follow the resolution (so the image count and size change the answer).
    vision_trains: bool = False
    image_tokens_vary: bool = False
    # ZeRO-3 / FSDP: the per-layer buffers gathered and reduce-scattered on a side stream (GiB), which the
    # allocator's reserve follows beyond its share of the allocated peak (see ``overhead``)
    side_stream_gib: float = 0.0
    # LoRA/QLoRA under FSDP with the wrapping unknown: what units mixing frozen weights and adapters would add per
    # GPU (see ``sharding``); None where it does not apply or the wrapping is stated
    mixed_units_extra_gib: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def training_gib(self) -> float:
        """The training step's own peak, per GPU as nvidia-smi would see it (evaluation and generation left out)."""
        return max((self.at(m) or 0.0) for m in TRAINING_MOMENTS)

    def at(self, moment: str) -> float | None:
        """A moment of the step as nvidia-smi would see it (allocator reserve and CUDA context added, as for
        ``per_gpu_gib``); None when the step has no such moment."""
        allocated = self.moments.get(moment)
        if allocated is None:
            return None
        # the side streams' reserve is the same at every moment; the rest follows what is allocated
        side = SIDE_STREAM_RESERVE * self.side_stream_gib
        share = (self.reserved_gib - side) / self.allocated_gib if self.allocated_gib else 1.0
        return allocated * share + side + (self.per_gpu_gib - self.reserved_gib)


@dataclass(frozen=True)
class Assumed:
    """One thing the estimate assumed: a key of ``assume.*`` in knowledge/texts.yaml and the numbers it shows."""

    key: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Moment:
    name: str
    parts: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.parts.values())


def estimate(setup: Setup) -> Estimate:
    setup = _normalise(setup)
    stated = setup
    whole = setup.model
    extra_lines: list[Line] = []
    if setup.tensor_parallel > 1:
        # one tensor-parallel rank: its share of each layer, data-parallel sharding over the other ranks
        extra_lines.append(line("parallel.tensor", tp=setup.tensor_parallel))
        setup = setup.replace(model=parallel.sharded(whole, setup.tensor_parallel),
                              num_gpus=setup.num_gpus // setup.tensor_parallel, tensor_parallel=1)
    shape = setup.model
    d = anatomy.dims(shape)
    obj = objective(setup)
    tr = trainable(setup)
    w = weights(setup, tr)
    opt = optimizer_states(setup, tr)
    p, pr, _ = compute_dtypes(setup)
    step = setup
    if setup.context_parallel > 1:
        step = setup.replace(seq_len=parallel.local_seq_len(setup.seq_len, setup.context_parallel))
        extra_lines.append(line("parallel.context", cp=setup.context_parallel, seq=setup.seq_len,
                                local=step.seq_len))
    acts = activations(step, obj.rows)
    # the logits cover the decoder's tokens: an encoder-decoder model's targets
    tokens = obj.rows * ((setup.target_len or step.seq_len) if getattr(shape, "encoder_layers", 0) else step.seq_len)
    grads_sharded = setup.strategy == "fsdp" or (setup.strategy == "deepspeed" and setup.zero_stage >= 2)
    grad_share = 1 / (setup.num_gpus if grads_sharded else 1)
    fused_head = setup.loss in ("fused_linear", "cce")
    head_grad = d.vocab * d.hidden * tr.groups[0].dtype_bytes * grad_share if setup.method == "full" else 0.0
    lg = logits(tokens, d.vocab, p, obj.lm_head, d.logit_softcap, setup.loss, d.hidden, setup.loss_chunks,
                setup.compiled, head_grad if fused_head else 0.0)
    k = obj.trained_models          # PPO trains a value model beside the policy
    base_copy = w.frozen if setup.adapters else w.total
    states = ModelStates(
        weights=w.total * k, grads=tr.bytes * k, states=opt.states * k,
        master=opt.master * k, workspace=opt.step_workspace, frozen_copies=obj.frozen_copies * base_copy,
        trainable_params=tr.params * k, layer_params=anatomy.layer_params(shape),
        total_params=anatomy.total_params(shape), hidden=d.hidden, half=2 if p == 2 else 4,
        root_bytes=anatomy.root_params(shape) * (2 if p == 2 else 4) * k, mixed_units=_mixed_units(setup, shape) * k,
        **_quantised_sharding(setup, shape))
    g = per_gpu(setup, states)

    split = setup.num_gpus if setup.strategy == "model_parallel" else 1
    # lm_head's weight gradient is the first one backward allocates, beside the logits' gradient.
    tied_sum = 0.0
    head_grads, head_logits = 0.0, lg.grad
    if setup.method == "full":
        vh = d.vocab * d.hidden * grad_share
        head_grads = head_grad
        if acts.weight_copies and tr.groups[0].dtype_bytes == 4 and p == 2:
            # autocast's half copy of the fp32 weight gets the gradient (beside the logits' gradient), which
            # is then cast up to fp32 (beside the half one, the logits' gradient gone)
            if lg.grad + vh * p >= vh * (4 + p):
                head_grads = vh * p
            else:
                head_grads, head_logits = vh * (4 + p), 0.0
        if d.tied:
            # tied embeddings: lm_head's share waits in autograd's input buffer for the embedding's share,
            # and the two are summed into a third tensor at the end of backward
            tied_sum = 2 * d.vocab * d.hidden * tr.groups[0].dtype_bytes * grad_share
    chunk_sums = setup.method == "full" and setup.loss == "chunked" and setup.loss_chunks > 1
    if chunk_sums:
        # lm_head runs once per chunk, so its weight gradient arrives in C parts; autograd's input buffer adds
        # each part to the running sum out of place, and the sum, the new part and the result coexist
        # (measured on CPU: measure_mechanisms.py, chunked full fine-tuning)
        head_grads = max(head_grads, 3 * head_grad)
    if fused_head:
        head_grads = 0.0        # computed by the fused loss in the forward pass, counted in its kept bytes
    acc_grads = g.grads if setup.grad_accum > 1 else 0.0
    kept = acts.kept * k / split
    copies = acts.weight_copies / split
    W = g.weights / split
    O = g.optimizer / split
    G = g.grads / split
    B = g.grad_buffers / split
    step_extra = g.step_extra / split
    if setup.optimizer_in_backward:
        # each parameter is stepped, and its gradient freed, as soon as backward has completed it: one
        # gradient and one parameter's step temporaries at a time, beside whatever backward holds then
        one = max(grp.largest * grp.dtype_bytes for grp in tr.groups) * grad_share * k / split
        if setup.optimizer == "adamw":      # foreach over one tensor: one state-sized temporary
            one_step = max(grp.largest * (4 if has_master(setup) else grp.dtype_bytes) for grp in tr.groups)
            one_step *= grad_share / split
        else:
            one_step = opt.step_workspace / split if setup.optimizer == "adafactor" else 0.0
        G, acc_grads, step_extra = one, 0.0, one_step
        if setup.method == "full":      # lm_head's own step, once its gradient is complete
            head_grads = max(head_grads, head_grad + one_step) if chunk_sums else head_grads + one_step
        extra_lines.append(line("optimizer.in_backward", gib=one / GIB))
    host_offloaded = 0.0
    layer_back = 0.0
    if setup.activation_offload:
        off = offloaded(step, acts, (d.layers if setup.method != "freeze" else
                                     min(setup.freeze_trainable_layers, d.layers)))
        kept = max(kept - off.moved * k / split, 0.0)
        layer_back = off.brought_back * k / split
        host_offloaded = off.host * k / split * setup.num_gpus
        extra_lines.append(off.line)
    f8 = fp8(step, tokens, p, 1 if setup.grad_checkpointing else d.layers)
    if setup.grad_checkpointing:      # only the recomputed layer saves what FP8 changes, during backward
        layer_back += (f8.kept + f8.weight_copies) / split
    else:
        kept = max(kept + (f8.kept + f8.weight_copies) / split, 0.0)
    layer_back += f8.backward / split
    extra_lines += list(f8.lines)
    live = {"weights": W + g.gathered + copies, "gradients": acc_grads / split + B, "optimizer": O}
    # The loss's own peak (12 B/token/vocab) comes before lm_head's weight gradient exists; by then only the
    # logits' gradient in the compute dtype is left beside it (see ``logits``).
    head_peak = head_grads + head_logits
    loss_peak = max(lg.backward, head_peak)
    # What ends the recomputation (the MLP product, or down_proj's output) is gone before the gradients flow
    # through the layer: the recomputed set peaks once with it, and once without it beside the gradients.
    layer_peak = max(acts.recompute, acts.recompute - acts.recompute_tail + acts.backward_working) * k / split \
        + layer_back
    # lm_head's half copy (autocast over a fp32 lm_head) is freed by lm_head's backward, before any layer's
    head_copy = acts.head_copy / split
    if loss_peak + head_copy >= layer_peak and lg.backward >= head_peak:
        backward = dict(live, activations=kept, logits=lg.backward)
    elif loss_peak + head_copy >= layer_peak:
        backward = dict(live, gradients=live["gradients"] + head_grads, activations=kept, logits=head_logits)
    else:
        backward = dict(live, weights=live["weights"] - head_copy, activations=kept + layer_peak, logits=0.0)
    # The last layer's attention transient and the loss's working set come one after the other.
    transient = acts.forward_transient * k / split + f8.forward / split
    if setup.context_parallel > 1:
        transient += parallel.exchange_bytes(tokens, d.kv_dim, p) * k / split
    if transient > lg.forward:
        forward = dict(live, activations=kept + transient, logits=0.0)
    else:
        forward = dict(live, activations=kept, logits=lg.forward)
    moments = [
        _Moment("end of forward", forward),
        _Moment("start of backward", backward),
        _Moment("end of backward", {
            "weights": W + g.gathered, "gradients": G + B + tied_sum / split, "optimizer": O, "activations": 0.0,
            "logits": 0.0}),
        _Moment("optimizer step", {
            "weights": W, "gradients": G + B, "optimizer": O + step_extra, "activations": 0.0,
            "logits": 0.0}),
    ]
    ev = evaluation(setup, p) if evaluates(setup) else None
    if ev is not None:
        eval_tokens = ev.batch * setup.seq_len
        eval_logits = logits(eval_tokens, d.vocab, p, obj.lm_head, d.logit_softcap).forward
        # The Trainer evaluates after the optimizer step has zeroed the gradients.  A no-grad forward frees each
        # op's inputs as it goes: one layer's MLP intermediates at a time.  The kept logits sit beside the next
        # step's forward; their concatenation comes after it.
        fwd = eval_tokens * 3 * p * d.intermediate
        base = {"weights": W + g.gathered, "gradients": B, "optimizer": O}
        if fwd + eval_logits + ev.kept_before >= ev.kept_peak:
            moments.append(_Moment("evaluation", dict(base, activations=fwd, logits=eval_logits + ev.kept_before)))
        else:
            moments.append(_Moment("evaluation", dict(base, activations=0.0, logits=ev.kept_peak)))
        if ev.generation:
            moments.append(_Moment("generation", dict(base, activations=ev.generation, logits=0.0)))
    ro = rollout(setup, w.total)
    if ro is not None:
        if ro.resident:
            for m in moments:
                m.parts["rollouts"] = ro.resident
        if ro.generation or ro.gathered:
            moments.append(_Moment("rollouts", {"weights": W + g.gathered + ro.gathered, "gradients": B,
                                                "optimizer": O, "activations": 0.0, "logits": 0.0,
                                                "rollouts": ro.generation}))
    peak = max(moments, key=lambda m: m.total)
    # paged optimizer states live in CUDA unified memory, outside torch's allocator (see ``optimizer``)
    paged = O * opt.paged / (opt.states + opt.master) if opt.paged else 0.0
    allocated = peak.total - (paged if peak.parts.get("optimizer") else 0.0)
    reserve_share = ALLOCATOR_RESERVE
    # vLLM sizes its own pool to its share of the card: no fragmentation reserve on top of it
    pooled = peak.parts.get("rollouts", 0.0) if setup.vllm == "colocate" else 0.0
    side_reserve = SIDE_STREAM_RESERVE * g.side_stream / split
    reserve = (allocated - pooled) * reserve_share + side_reserve
    context = CUDA_CONTEXT_GIB * GIB
    resident_paged = paged if peak.parts.get("optimizer") else 0.0
    breakdown = {c: peak.parts.get(c, 0.0) / GIB for c in COMPONENTS[:-1]}
    breakdown["overhead"] = (reserve + context) / GIB
    per_gpu_gib = (allocated + reserve + context + resident_paged) / GIB
    host = _host(stated, g.host + host_offloaded, w.total, ev.host if ev else 0.0)

    derivation = list(tr.lines) + list(w.lines) + list(opt.lines) + list(g.lines) + list(acts.lines) + list(lg.lines)
    derivation += list(obj.lines) + (list(ev.lines) if ev else []) + (list(ro.lines) if ro else []) + extra_lines
    if setup.method == "full" and tr.params:
        per_param = (w.trained + tr.bytes + opt.states + opt.master) / tr.params
        derivation.append(line("estimate.model_states", per=per_param, count=count(tr.params),
                               gib=per_param * tr.params / GIB))
    if split > 1:
        derivation.append(line("estimate.model_parallel", n=split))
    derivation.append(line("estimate.peak", moment=text("moment." + peak.name.replace(" ", "_")), parts=[
        line("estimate.part", part=text("part." + c), gib=v) for c, v in breakdown.items() if c != "overhead" and v]))
    derivation.append(line("estimate.overhead", share=reserve_share, allocated=allocated / GIB,
                           context=CUDA_CONTEXT_GIB, gib=breakdown["overhead"],
                           side=line("estimate.overhead_side_stream", copies=SIDE_STREAM_RESERVE,
                                     buffers=g.side_stream / split / GIB) if side_reserve else ""))
    if resident_paged:
        derivation.append(line("optimizer.paged", gib=resident_paged / GIB))
    derivation.append(host[1])
    mixed_extra = None
    if setup.fsdp_mixed_units is None and setup.strategy == "fsdp" and setup.adapters:
        mixed_extra = estimate(stated.replace(fsdp_mixed_units=True)).per_gpu_gib - per_gpu_gib
    fits = headroom = None
    if setup.gpu_memory_gib:
        headroom = setup.gpu_memory_gib - per_gpu_gib
        fits = headroom >= 0
    limiter = max(COMPONENTS, key=lambda c: breakdown[c])
    return Estimate(
        per_gpu_gib=per_gpu_gib, allocated_gib=allocated / GIB, reserved_gib=(allocated + reserve) / GIB,
        host_ram_gib=host[0] / GIB, breakdown=breakdown, peak_moment=peak.name,
        trainable_params=tr.params * k, total_params=anatomy.total_params(whole), fits=fits,
        headroom_gib=headroom, limiter=limiter, derivation=derivation,
        assumptions=assumptions(setup, tr, mixed_extra),
        moments={m.name: (m.total - (paged if m.parts.get("optimizer") else 0.0)) / GIB for m in moments},
        weights_gib=(g.weights / split) / GIB,
        layer_gib=anatomy.layer_params(whole) * base_float_bytes(setup) / GIB,
        fp32_master=has_master(setup) or (p == 2 and pr == 4 and setup.method in ("full", "freeze")),
        gpu_memory_gib=setup.gpu_memory_gib,
        eval_step_gib=ev.step_bytes / GIB if ev is not None and ev.step_bytes else None,
        vision_trains=_vision_trains(setup),
        image_tokens_vary=bool(getattr(getattr(shape, "vision", None), "tokens_vary", False)),
        eval_steps_held=ev.steps_held if ev is not None else None,
        side_stream_gib=g.side_stream / split / GIB,
        mixed_units_extra_gib=mixed_extra,
    )


def _side_streams(setup: Setup) -> bool:
    """Layers gathered and gradients reduce-scattered per layer on a side stream (ZeRO-3, FSDP on 2+ GPUs)."""
    return setup.num_gpus > 1 and (setup.strategy == "fsdp" or (setup.strategy == "deepspeed"
                                                               and setup.zero_stage == 3))


def _mixed_units(setup: Setup, shape: Any) -> float:
    """The frozen decoder-layer weights as FSDP stores them (flat parameters of the stored dtype; quantised
    layers as packed codes and 16-bit rest), which get gradients of the same size when units mix them with
    adapters (see ``sharding``)."""
    if not setup.mixes_units:
        return 0.0
    if setup.quantized:
        return _quantised_sharding(setup, shape)["layer_bytes"] * shape.layers
    return anatomy.layer_params(shape) * shape.layers * base_float_bytes(setup)


def _quantised_sharding(setup: Setup, shape: Any) -> dict[str, float]:
    """How quantised weights shard: one layer as gathered (packed codes + 16-bit rest) and the constants
    every rank keeps (see ``sharding``)."""
    if not setup.quantized:
        return {}
    linear = anatomy.linear_weights(shape)
    code = 1.0 if setup.load_dtype == "int8" else 0.5
    qbytes, _, _ = quantized_bytes(setup)
    per_layer_linear = linear / shape.layers
    rest = anatomy.layer_params(shape) - per_layer_linear
    return {"layer_bytes": per_layer_linear * code + rest * 2, "replicated": qbytes - linear * code}


def _normalise(setup: Setup) -> Setup:
    """Read the set-up the way the libraries will run it."""
    changes: dict[str, Any] = {}
    if setup.method == "lora" and setup.quantized:
        changes["method"] = "qlora"
    if setup.method == "qlora" and not setup.quantized:
        changes["load_dtype"] = "nf4"
    if setup.strategy == "single" and setup.num_gpus > 1:
        changes["strategy"] = "ddp"
    if setup.strategy in ("ddp", "single", "model_parallel") and setup.zero_stage:
        changes["zero_stage"] = 0
    return setup.replace(**changes) if changes else setup


def _host(setup: Setup, offloaded: float, weights_bytes: float, predictions: float = 0.0) -> tuple[float, Line]:
    """Host RAM: the larger of loading and training, over all ranks on the machine.

    Without a ``device_map`` (the Trainer's usual path) ``from_pretrained``
    materialises the whole model in CPU RAM in every rank before it moves to
    the GPU; quantised loads and ZeRO-3's ``zero.Init`` place weights on the GPU
    (or partition them) as they load.  Evaluation's kept predictions come on
    top of the training-time figure.
    """
    nodes = min(setup.num_nodes, setup.num_gpus)
    ranks = -(-setup.num_gpus // nodes)         # ranks on one machine; host RAM is counted per machine
    offloaded, predictions = offloaded / nodes, predictions / nodes
    base = ranks * HOST_PROCESS_GIB * GIB
    direct = setup.quantized or setup.strategy == "model_parallel" or (
        setup.strategy == "deepspeed" and setup.zero_stage == 3)
    loading = base + (0.0 if direct else ranks * weights_bytes)
    training = base + offloaded + predictions
    if loading > training:
        said = line("estimate.host_loading", ranks=ranks, process=HOST_PROCESS_GIB, model=weights_bytes / GIB,
                    gib=loading / GIB)
    else:
        said = line("estimate.host_training", ranks=ranks, process=HOST_PROCESS_GIB, offloaded=offloaded / GIB,
                    predictions=line("estimate.host_predictions", gib=predictions / GIB) if predictions else "",
                    gib=training / GIB)
    return max(loading, training), said


def _vision_trains(setup: Setup) -> bool:
    from .vision import needs_grad
    return needs_grad(setup)


def assumptions(setup: Setup, tr, mixed_extra: float | None = None) -> list[Assumed]:
    """What the figures take for granted beyond the stated set-up; the report words each in the user's
    language (``knowledge/texts.yaml``, keys ``assume.*``)."""
    out = [Assumed("cuda_context", {"gib": CUDA_CONTEXT_GIB}),
           Assumed("reserve", {"share": f"{ALLOCATOR_RESERVE:.0%}"}),
           *([Assumed("reserve_side_stream", {"copies": f"{SIDE_STREAM_RESERVE:g}"})] if _side_streams(setup) else []),
           Assumed("padded_rows" if setup.packing else "padded_rows_unpacked", {"seq": setup.seq_len})]
    if setup.loss == "full":
        out.append(Assumed("full_vocab_loss"))
    if setup.attention == "sdpa" and not setup.packing and setup.batch_size > 1:
        out.append(Assumed("sdpa_repeat_kv"))
    if setup.adapters:
        out.append(Assumed("lora_dropout", {"p": setup.lora_dropout}))
        if setup.adapter_fp32:
            out.append(Assumed("adapters_fp32"))
        if mixed_extra is not None:
            out.append(Assumed("fsdp_separate_units", {"gib": f"{mixed_extra:.2f}"}))
    if setup.quantized and setup.load_dtype in ("nf4", "fp4"):
        out.append(Assumed("nf4_double" if setup.double_quant else "nf4_single"))
        if not setup.kbit_fp32_upcast:
            extra = (anatomy.total_params(setup.model) - anatomy.linear_weights(setup.model)) * 2 / GIB
            out.append(Assumed("kbit_no_upcast", {"gib": f"{extra:.2f}"}))
    if tr.missing_targets:
        out.append(Assumed("missing_targets", {"names": ", ".join(tr.missing_targets)}))
    if setup.optimizer.startswith("paged"):
        out.append(Assumed("paged_states"))
    if setup.eval_generate:
        out.append(Assumed("prompt_length", {"seq": setup.seq_len}))
    if generates(setup):
        prompt, completion = lengths(setup)
        if setup.gen_new_tokens is None:
            out.append(Assumed("rl_completion", {"tokens": TRL_COMPLETION}))
        if setup.rl_prompt_len is None:
            out.append(Assumed("rl_prompt", {"tokens": prompt, "seq": setup.seq_len, "completion": completion}))
        if setup.rl_beta is None and setup.objective in DEFAULT_BETA and not setup.adapters:
            out.append(Assumed("rl_beta", {"objective": setup.objective, "beta": DEFAULT_BETA[setup.objective]}))
        if setup.vllm == "none":
            out.append(Assumed("rl_generate"))
    out.append(Assumed("host_process", {"gib": HOST_PROCESS_GIB}))
    from .architecture import assumptions as architecture_assumptions
    out += architecture_assumptions(setup)
    return out
