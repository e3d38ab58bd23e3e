"""The memory model: figures derived from first principles, measured ones, and the headline set-ups."""
from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass

import pytest

from oomdoctor.estimate import (
    COMPONENTS, Setup, estimate, nf4_bytes_per_param, state_bytes_per_param, zero_model_states,
)
from oomdoctor.estimate import activations as acts
from oomdoctor.estimate.dtypes import GIB
from oomdoctor.estimate.optimizer import adafactor_bytes, optimizer_states
from oomdoctor.estimate.sharding import ModelStates, per_gpu
from oomdoctor.estimate.trainable import Tensors, trainable


def said(est) -> list[str]:
    """The derivation as an English reader gets it."""
    from oomdoctor.conclusions.sizing import say_derivation
    from oomdoctor.knowledge import default

    return say_derivation(est, default(), "en")

Linear = namedtuple("Linear", "name d_in d_out count bias")


@dataclass(frozen=True)
class Shape:
    """A stand-in for oomdoctor.catalog's ModelShape: the protocol the estimator reads, no more."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied_embeddings: bool = False
    qkv_bias: bool = False
    experts: int = 0
    experts_active: int = 0
    moe_intermediate: int = 0

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def linear_layers(self) -> list:
        L, h = self.layers, self.hidden
        out = [Linear("q_proj", h, self.q_dim, L, self.qkv_bias), Linear("k_proj", h, self.kv_dim, L, self.qkv_bias),
               Linear("v_proj", h, self.kv_dim, L, self.qkv_bias), Linear("o_proj", self.q_dim, h, L, False)]
        if self.experts:
            n = L * self.experts
            w = self.moe_intermediate
            return out + [Linear("gate", h, self.experts, L, False), Linear("w1", h, w, n, False),
                          Linear("w3", h, w, n, False), Linear("w2", w, h, n, False)]
        I = self.intermediate
        return out + [Linear("gate_proj", h, I, L, False), Linear("up_proj", h, I, L, False),
                      Linear("down_proj", I, h, L, False)]

    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    def lm_head_params(self) -> int:
        return 0 if self.tied_embeddings else self.vocab * self.hidden

    def norm_params(self) -> int:
        return (2 * self.layers + 1) * self.hidden

    def param_count(self) -> int:
        linears = sum((l.d_in * l.d_out + (l.d_out if l.bias else 0)) * l.count for l in self.linear_layers())
        return self.embedding_params() + self.lm_head_params() + self.norm_params() + linears

    def active_param_count(self) -> int:
        return self.param_count()


LLAMA3_8B = Shape(layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, intermediate=14336, vocab=128256)
LLAMA3_70B = Shape(layers=80, hidden=8192, heads=64, kv_heads=8, head_dim=128, intermediate=28672, vocab=128256)
QWEN25_7B = Shape(layers=28, hidden=3584, heads=28, kv_heads=4, head_dim=128, intermediate=18944, vocab=152064,
                  qkv_bias=True)
MIXTRAL = Shape(layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, intermediate=14336, vocab=32000,
                experts=8, experts_active=2, moe_intermediate=14336)
TINY = Shape(layers=2, hidden=256, heads=8, kv_heads=2, head_dim=32, intermediate=688, vocab=1000)


def setup(**kw) -> Setup:
    kw.setdefault("model", LLAMA3_8B)
    return Setup(**kw)


# ------------------------------------------------------------------ shapes
def test_stand_in_shapes_have_the_published_parameter_counts():
    assert LLAMA3_8B.param_count() == 8_030_261_248
    assert QWEN25_7B.param_count() == 7_615_616_512
    assert LLAMA3_70B.param_count() == 70_553_706_496


# ------------------------------------------------------------------ bytes per parameter
def test_optimizer_state_bytes_from_first_principles():
    # torch AdamW: exp_avg and exp_avg_sq, zeros_like(param).
    assert state_bytes_per_param("adamw", 4) == 8
    assert state_bytes_per_param("adamw", 2) == 4
    assert state_bytes_per_param("adamw_fused", 2) == 4
    # bitsandbytes: two uint8 states + one fp32 absmax per 256 elements each; small tensors stay fp32.
    assert state_bytes_per_param("adamw_8bit", 2) == pytest.approx(2 + 2 * 4 / 256)
    assert state_bytes_per_param("paged_adamw_8bit", 2) == pytest.approx(2.03125)
    assert state_bytes_per_param("adamw_8bit", 2, numel=4095) == 8
    assert state_bytes_per_param("paged_adamw_32bit", 2) == 8
    assert state_bytes_per_param("sgd", 4) == 0
    assert state_bytes_per_param("sgd_momentum", 2) == 2
    assert state_bytes_per_param("lion", 2) == 4
    assert state_bytes_per_param("lion_8bit", 2) == pytest.approx(1 + 4 / 256)


def test_adafactor_factors_matrices_into_rows_and_columns():
    group = Tensors("w", 2, ((14336, 4096, 32), (4096, 0, 65)))
    assert adafactor_bytes(group) == 4 * (14336 + 4096) * 32 + 4 * 4096 * 65
    s = setup(method="full", optimizer="adafactor")
    factored = optimizer_states(s, trainable(s))
    assert factored.states < 0.01 * 8.03e9 * 4
    # Its step works on fp32 copies of one tensor at a time: grad, param and two updates of the largest.
    assert factored.step_workspace == 4 * 4 * 128256 * 4096


@pytest.mark.parametrize("load, precision, strategy, expected", [
    ("fp32", "bf16", "single", 16),      # HF Trainer, no torch_dtype, bf16=True: 4 + 4 + 8
    ("bf16", "bf16", "single", 8),       # bf16 weights, torch AdamW states in bf16: 2 + 2 + 4
    ("fp32", "fp32", "single", 16),      # plain fp32: 4 + 4 + 8
    ("bf16", "bf16", "deepspeed", 16),   # DeepSpeed mixed precision: 2 + 2 + (4 master + 8)
])
def test_model_states_per_parameter(load, precision, strategy, expected):
    est = estimate(setup(method="full", load_dtype=load, precision=precision, strategy=strategy))
    line = next(l for l in said(est) if l.startswith("model states:"))
    assert line.startswith(f"model states: {expected} B per trained parameter")


def test_nf4_bytes_per_param_derived_from_the_block_layout():
    assert nf4_bytes_per_param(double_quant=False) == 0.5 + 4 / 64
    assert nf4_bytes_per_param() == pytest.approx(0.5 + 1 / 64 + 4 / (64 * 256))
    # QLoRA paper: double quantisation brings the constants from 0.5 to 0.127 bits per parameter.
    assert (nf4_bytes_per_param() - 0.5) * 8 == pytest.approx(0.127, abs=5e-4)


# ------------------------------------------------------------------ trainable parameters
def test_lora_rank8_on_q_and_v_of_llama3_8b():
    tr = trainable(setup(method="lora", lora_rank=8, lora_targets=("q_proj", "v_proj")))
    # q: 8·(4096 + 4096) × 32, v: 8·(4096 + 1024) × 32
    assert tr.params == 3_407_872
    assert tr.groups[0].dtype_bytes == 4          # peft upcasts adapters to fp32


def test_all_linear_targets_every_linear_but_lm_head():
    tr = trainable(setup(method="lora", lora_rank=16, lora_targets=("all-linear",)))
    per_layer = 16 * ((4096 + 4096) * 2 + (4096 + 1024) * 2 + (4096 + 14336) * 3)
    assert tr.params == per_layer * 32


def test_modules_to_save_are_full_trainable_copies():
    base = trainable(setup(method="lora"))
    saved = trainable(setup(method="lora", modules_to_save=("lm_head", "embed_tokens")))
    assert saved.params - base.params == 2 * 128256 * 4096
    assert estimate(setup(method="lora", modules_to_save=("lm_head",))).breakdown["weights"] > \
        estimate(setup(method="lora")).breakdown["weights"] + 0.9


def test_freeze_trains_the_last_layers():
    tr = trainable(setup(method="freeze", freeze_trainable_layers=2))
    assert tr.params == 2 * 218_112_000


# ------------------------------------------------------------------ activations
MEASURED = [
    # (set-up on the tiny shape, bytes per token of one decoder layer caught by saved_tensors_hooks)
    (dict(method="full", load_dtype="bf16", precision="fp32", attention="flash"), 10_920),
    (dict(method="full", load_dtype="bf16", precision="fp32", attention="eager"), 14_728),
    (dict(method="full", load_dtype="fp32", precision="fp32", attention="flash"), 19_752),
    (dict(method="full", load_dtype="fp32", precision="bf16", attention="flash"), 13_480),
    (dict(method="lora", load_dtype="bf16", precision="bf16", attention="flash", lora_dropout=0.0), 8_552),
    (dict(method="lora", load_dtype="bf16", precision="fp32", attention="flash", lora_dropout=0.0), 9_608),
    (dict(method="lora", load_dtype="bf16", precision="bf16", attention="flash", lora_dropout=0.0,
          lora_targets=("all-linear",)), 12_056),
]


@pytest.mark.parametrize("kw, measured", MEASURED)
def test_layer_activations_match_the_measured_saved_tensors(kw, measured):
    """Measured on CPU with torch 2.13 / transformers 5.24 / peft 0.21, b=2, s=64 (SDPA without a mask
    runs GQA unexpanded, which is what "flash" models here); tests/test_estimate_measured.py re-measures."""
    s = Setup(model=TINY, batch_size=2, seq_len=64, **kw)
    ctx = acts.context(s)
    total = sum(b for _, _, b in acts.layer_items(ctx)) + acts.attention_per_position(ctx) * 64
    assert total == measured


def test_gradient_checkpointing_reduces_activations():
    off = estimate(setup(method="lora", batch_size=4, seq_len=2048))
    on = estimate(setup(method="lora", batch_size=4, seq_len=2048, grad_checkpointing=True))
    assert on.breakdown["activations"] < off.breakdown["activations"] / 10
    assert on.per_gpu_gib < off.per_gpu_gib


def test_flash_below_sdpa_below_eager_at_long_sequences():
    # Two padded rows: SDPA gets a padding mask and repeats K/V for every head (bench/accuracy/data/grid.json
    # measures it; a single unpadded row runs SDPA with enable_gqa, as flash does).
    def activations(attention):
        return estimate(setup(method="lora", attention=attention, seq_len=8192, batch_size=2)).breakdown["activations"]
    flash, sdpa, eager = activations("flash"), activations("sdpa"), activations("eager")
    assert flash < sdpa < eager
    # eager's s² term: (4 + 2)·heads·s bytes per token per layer.
    assert eager - sdpa > 2 * 32 * 8192 * 6 * 32 * 8192 / GIB * 0.9


def test_activations_scale_with_tokens():
    # packed rows: no padding mask, so doubling the rows changes nothing but the token count
    one = estimate(setup(method="lora", batch_size=1, packing=True)).breakdown
    two = estimate(setup(method="lora", batch_size=2, packing=True)).breakdown
    assert two["logits"] == pytest.approx(2 * one["logits"])
    assert two["activations"] == pytest.approx(2 * one["activations"], rel=0.02)


def test_frozen_linears_keep_fewer_activations_than_full_fine_tuning():
    full = acts.layer_items(acts.context(setup(method="full")))
    lora = acts.layer_items(acts.context(setup(method="lora", lora_dropout=0.0)))
    assert sum(b for *_, b in lora) < sum(b for *_, b in full)


def test_logits_peak_is_twelve_bytes_per_token_and_vocab():
    est = estimate(setup(method="lora", batch_size=4, seq_len=2048, grad_checkpointing=True))
    assert est.peak_moment == "start of backward"
    assert est.breakdown["logits"] == pytest.approx(12 * 8192 * 128256 / GIB)


# ------------------------------------------------------------------ sharding
def test_zero_formulas_match_the_paper():
    """ZeRO paper Figure 1: Ψ = 7.5B, N = 64, K = 12 → 120, 31.4, 16.6 and 1.9 GB per GPU."""
    psi, n = 7.5e9, 64
    assert zero_model_states(psi, n, 0) / 1e9 == pytest.approx(120)
    assert zero_model_states(psi, n, 1) / 1e9 == pytest.approx(31.4, abs=0.05)
    assert zero_model_states(psi, n, 2) / 1e9 == pytest.approx(16.6, abs=0.05)
    assert zero_model_states(psi, n, 3) / 1e9 == pytest.approx(1.88, abs=0.01)


def test_zero_stages_divide_what_the_paper_says():
    def parts(stage):
        return estimate(setup(method="full", strategy="deepspeed", zero_stage=stage, num_gpus=8)).breakdown
    s0, s1, s3 = parts(0), parts(1), parts(3)
    assert s1["optimizer"] == pytest.approx(s0["optimizer"] / 8, rel=0.01)
    assert s1["weights"] == pytest.approx(s0["weights"])
    assert s3["weights"] < s0["weights"] / 4
    est3 = estimate(setup(method="full", strategy="deepspeed", zero_stage=3, num_gpus=8))
    assert any("gathers the current and the prefetched layer" in l for l in said(est3))
    states = ModelStates(weights=2e9, grads=2e9, states=8e9, master=4e9, workspace=0,
                         frozen_copies=0, trainable_params=10**9, layer_params=10**7, total_params=10**9,
                         hidden=4096, half=2)
    by_stage = {z: per_gpu(setup(strategy="deepspeed", zero_stage=z, num_gpus=8), states) for z in (1, 2, 3)}
    assert by_stage[1].grads == 2e9 and by_stage[2].grads == 2e9 / 8 and by_stage[3].grads == 2e9 / 8
    assert by_stage[1].optimizer == by_stage[2].optimizer == 12e9 / 8
    assert by_stage[3].weights == 2e9 / 8 and by_stage[2].weights == 2e9


def test_offload_moves_optimizer_states_to_host_ram():
    on_gpu = estimate(setup(method="full", strategy="deepspeed", zero_stage=3, num_gpus=2))
    offloaded = estimate(setup(method="full", strategy="deepspeed", zero_stage=3, num_gpus=2,
                               offload_optimizer="cpu"))
    assert offloaded.breakdown["optimizer"] == 0
    assert offloaded.host_ram_gib > on_gpu.host_ram_gib + 8.03e9 * 16 / GIB
    assert offloaded.per_gpu_gib < on_gpu.per_gpu_gib


def test_fsdp_keeps_the_root_unit_whole_from_forward_to_the_end_of_backward():
    states = ModelStates(weights=2e9, grads=0, states=0, master=0, workspace=0, frozen_copies=0,
                         trainable_params=0, layer_params=10**7, total_params=10**9, hidden=4096, half=2,
                         root_bytes=3e8)
    two = per_gpu(setup(strategy="fsdp", num_gpus=2), states)
    assert two.gathered == 2 * 10**7 * 2 + 3e8
    # one rank: NO_SHARD gathers nothing; MixedPrecision casts fp32 units to half while they compute
    assert per_gpu(setup(strategy="fsdp", num_gpus=1, load_dtype="bf16"), states).gathered == 0
    assert per_gpu(setup(strategy="fsdp", num_gpus=1, load_dtype="fp32"), states).gathered == 2 * 10**7 * 2
    assert per_gpu(setup(strategy="deepspeed", zero_stage=3, num_gpus=2), states).gathered < two.gathered
    # end to end: both embedding matrices (untied) and the final norm, gathered in bf16, also under CPU offload
    root_gib = (2 * 128256 * 4096 + 4096) * 2 / GIB
    offload = estimate(setup(method="qlora", load_dtype="nf4", num_gpus=2, strategy="fsdp", offload_param="cpu",
                             offload_optimizer="cpu"))
    assert offload.breakdown["weights"] > root_gib
    assert any(f"lm_head), whole from forward to the end of backward ({root_gib:.2f} GiB)" in line
               for line in said(offload))


def test_bitsandbytes_dequantises_the_widest_weight_during_a_matmul():
    # The copy lives inside one projection's backward, beside that projection's input gradient (compute dtype),
    # not while the MLP's three gradients are alive (bench/accuracy/data/qlora.json): it bounds the working set
    # of short sequences and adds nothing to long ones.
    widest = 8192 * 28672           # gate/up/down_proj of Llama-3-70B, dequantised to bf16
    for seq, copy_bounds in ((256, True), (8192, False)):
        kw = dict(model=LLAMA3_70B, grad_checkpointing=True, batch_size=1, seq_len=seq, kbit_fp32_upcast=False)
        q = acts.activations(setup(method="qlora", load_dtype="nf4", **kw), rows=1)
        plain = acts.activations(setup(method="lora", load_dtype="bf16", **kw), rows=1)
        inside_projection = seq * (2 * 2 * 8192 + 2 * 28672) + widest * 2
        assert q.backward_working == pytest.approx(max(plain.backward_working, inside_projection))
        assert (q.backward_working > plain.backward_working) is copy_bounds
        assert q.forward_transient == pytest.approx(max(plain.forward_transient, widest * 2))


def test_ddp_keeps_a_replica_and_gradient_buckets():
    single = estimate(setup(method="full", load_dtype="bf16"))
    ddp = estimate(setup(method="full", load_dtype="bf16", strategy="ddp", num_gpus=4))
    assert ddp.breakdown["gradients"] == pytest.approx(2 * single.breakdown["gradients"])
    assert ddp.host_ram_gib == pytest.approx(4 * single.host_ram_gib)


def test_model_parallel_splits_the_weights():
    one = estimate(setup(method="lora", gpu_memory_gib=24))
    two = estimate(setup(method="lora", strategy="model_parallel", num_gpus=2, gpu_memory_gib=24))
    assert two.breakdown["weights"] == pytest.approx(one.breakdown["weights"] / 2)


# ------------------------------------------------------------------ the step's moments
def test_breakdown_is_the_peak_moment_and_adds_up():
    est = estimate(setup(method="full", load_dtype="bf16", gpu_memory_gib=80))
    assert set(est.breakdown) == set(COMPONENTS)
    assert sum(est.breakdown.values()) == pytest.approx(est.per_gpu_gib)
    assert est.peak_moment == "optimizer step"
    assert est.breakdown["activations"] == 0          # freed before the step
    assert est.moments["optimizer step"] == pytest.approx(est.allocated_gib)
    assert est.allocated_gib < est.reserved_gib < est.per_gpu_gib


def test_gradients_are_freed_before_forward_unless_accumulating():
    plain = estimate(setup(method="full", load_dtype="bf16"))
    accum = estimate(setup(method="full", load_dtype="bf16", grad_accum=4))
    assert accum.moments["end of forward"] - plain.moments["end of forward"] == pytest.approx(
        8.03e9 * 2 / GIB, rel=0.01)


def test_dpo_doubles_rows_and_needs_a_reference_copy_unless_lora():
    sft = estimate(setup(method="full", load_dtype="bf16"))
    dpo = estimate(setup(method="full", load_dtype="bf16", objective="dpo"))
    assert dpo.moments["start of backward"] > sft.moments["start of backward"] + 14.9
    lora_sft = estimate(setup(method="lora", grad_checkpointing=True))
    lora_dpo = estimate(setup(method="lora", objective="dpo", grad_checkpointing=True))
    assert lora_dpo.breakdown["weights"] == pytest.approx(lora_sft.breakdown["weights"])
    assert lora_dpo.breakdown["logits"] == pytest.approx(2 * lora_sft.breakdown["logits"])


def test_moe_keeps_all_experts_but_activates_a_few():
    est = estimate(setup(model=MIXTRAL, method="qlora", load_dtype="nf4", grad_checkpointing=True))
    assert est.total_params > 45e9
    dense = Shape(layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, intermediate=8 * 14336, vocab=32000)
    dense_acts = acts.layer_items(acts.context(setup(model=dense, method="qlora", load_dtype="nf4")))
    moe_acts = acts.layer_items(acts.context(setup(model=MIXTRAL, method="qlora", load_dtype="nf4")), moe=True)
    assert sum(b for *_, b in moe_acts) < sum(b for *_, b in dense_acts) / 2


# ------------------------------------------------------------------ the headline set-ups
def test_llama3_8b_full_adamw_is_far_above_40gb_and_says_why():
    est = estimate(setup(method="full", load_dtype="fp32", precision="bf16", optimizer="adamw",
                         gpu_memory_gib=40))
    assert est.fits is False
    assert est.per_gpu_gib > 120
    states = est.breakdown["weights"] + est.breakdown["gradients"] + est.breakdown["optimizer"]
    assert states > 8.03e9 * 16 / GIB
    why = "\n".join(said(est))
    assert "16 B per trained parameter" in why and "119.66 GiB" in why
    assert est.limiter == "optimizer"


def test_llama3_70b_qlora_does_not_fit_24gb():
    est = estimate(setup(model=LLAMA3_70B, method="qlora", load_dtype="nf4", batch_size=1, seq_len=2048,
                         grad_checkpointing=True, gpu_memory_gib=24))
    assert est.fits is False
    assert est.breakdown["weights"] > 35
    assert est.limiter == "weights"
    assert any("0.515869 B" in l for l in said(est))


def test_qlora_is_smaller_than_lora():
    lora = estimate(setup(method="lora", grad_checkpointing=True))
    qlora = estimate(setup(method="qlora", load_dtype="nf4", grad_checkpointing=True))
    assert qlora.per_gpu_gib < lora.per_gpu_gib - 8


def test_llama3_8b_lora_bs4_seq2048_lands_in_a_plausible_range():
    """Floors: 16-bit weights 8.03e9 × 2 B = 14.96 GiB, and the loss over 4 × 2048 tokens × 128,256 vocab at
    12 B = 11.74 GiB at the start of backward.  With checkpointing the rest is small (the layer inputs,
    32 × 8192 × 8 KiB = 2 GiB); without, every layer's ~170 KB per token stays, ~43 GiB more: about what
    the Llama-3-8B LoRA reports on 24 GB cards (out of memory at bs 4) and 80 GB cards (fits only with
    checkpointing or a smaller batch) describe."""
    on = estimate(setup(method="lora", lora_rank=16, batch_size=4, seq_len=2048, grad_checkpointing=True))
    off = estimate(setup(method="lora", lora_rank=16, batch_size=4, seq_len=2048))
    assert 26 < on.per_gpu_gib < 40
    assert 60 < off.per_gpu_gib < 95
    assert off.limiter == "activations"


def test_setup_rejects_full_fine_tuning_of_quantised_weights():
    with pytest.raises(ValueError):
        Setup(model=LLAMA3_8B, method="full", load_dtype="nf4")
    with pytest.raises(ValueError):
        Setup(model=LLAMA3_8B, optimizer="adam")


def test_lm_heads_half_copy_is_gone_before_the_layers_go_through_backward():
    """After prepare_model_for_kbit_training lm_head stays fp32 and autocast saves its half copy; lm_head's backward
    frees it, before any recomputed layer (bench/accuracy/data/qlora.json, gpu_measure --sweep qlora-prep)."""
    mistral = Shape(layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, intermediate=14336, vocab=32000)
    # Llama-3's 128k vocabulary makes the loss the peak; with Mistral's 32k the recomputed fp32 MLP is
    for model, layer_peak in ((LLAMA3_8B, False), (mistral, True)):
        kw = dict(model=model, method="qlora", load_dtype="nf4", precision="bf16", grad_checkpointing=True,
                  kbit_fp32_upcast=True, seq_len=4096, batch_size=4)
        copy = 2 * model.vocab * 4096
        head_fp32 = 2 * model.vocab * 4096 * 2      # embeddings and lm_head at 4 B instead of TRL's 2 B
        own, trl = estimate(setup(**kw)), estimate(setup(kbit_head_bf16=True, **kw))
        assert (own.moments["end of forward"] - trl.moments["end of forward"]) * GIB == pytest.approx(head_fp32 + copy)
        extra = (own.moments["start of backward"] - trl.moments["start of backward"]) * GIB
        assert extra == pytest.approx(head_fp32 if layer_peak else head_fp32 + copy)
