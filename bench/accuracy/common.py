"""Shared by measure_grid.py and gpu_measure.py: tiny models of the real families, set-ups, estimator figures.

Everything here builds models from a config (random weights, nothing
downloaded).  A cell is a plain dict (see ``Cell``) so that it can be written to
JSON and rebuilt into the estimator's ``Setup`` without torch
(``setup_for_cell``), which is what tests/test_accuracy.py does.
"""
from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from oomdoctor.catalog import ModelShape, from_hf_config, to_hf_config  # noqa: E402
from oomdoctor.estimate import Setup  # noqa: E402
from oomdoctor.estimate.dtypes import GIB  # noqa: E402

# The real families' shapes, scaled down (ratios kept: GQA groups, MLP width, q_dim != hidden for Gemma 2,
# biases, tying, fused projections).  Real references in the comments.
FAMILIES: dict[str, ModelShape] = {
    # Llama-3-8B: h 4096, 32 heads / 8 KV heads, head 128, MLP 14336 (3.5 h), untied.
    "llama": ModelShape(id="tiny-llama", model_type="llama", layers=3, hidden=256, heads=8, kv_heads=2,
                        head_dim=32, intermediate=896, vocab=4096, max_position=4096),
    # Mistral-7B-v0.3: h 4096, 32 / 8 heads, MLP 14336, vocab 32768, untied, no sliding window.
    "mistral": ModelShape(id="tiny-mistral", model_type="mistral", layers=2, hidden=256, heads=8, kv_heads=2,
                          head_dim=32, intermediate=896, vocab=2048, max_position=4096),
    # Qwen2.5-0.5B: h 896, 14 / 2 heads, MLP 4864 (5.4 h), q/k/v bias, tied embeddings, huge vocabulary.
    "qwen2": ModelShape(id="tiny-qwen2", model_type="qwen2", layers=2, hidden=256, heads=8, kv_heads=2,
                        head_dim=32, intermediate=1376, vocab=6144, tied_embeddings=True, attention_bias=True,
                        max_position=4096),
    # Gemma-2-2B: h 2304, 8 / 4 heads of 256 (q_dim 2048 != h), MLP 9216, four norms a layer, tied,
    # logit soft-capping (attention 50, final 30), GeGLU.
    "gemma2": ModelShape(id="tiny-gemma2", model_type="gemma2", layers=2, hidden=288, heads=4, kv_heads=2,
                         head_dim=64, intermediate=1152, vocab=4096, tied_embeddings=True, norms_per_layer=4,
                         max_position=4096),
    # Phi-3-mini: h 3072, 32 heads, no GQA, fused qkv_proj and gate_up_proj, MLP 8192.
    "phi3": ModelShape(id="tiny-phi3", model_type="phi3", layers=2, hidden=256, heads=8, kv_heads=8, head_dim=32,
                       intermediate=688, vocab=2048, layout="phi3", max_position=4096),
    # Mixtral-8x7B: h 4096, 32 / 8 heads, 8 experts of 14336, 2 active.
    "mixtral": ModelShape(id="tiny-mixtral", model_type="mixtral", layers=2, hidden=256, heads=8, kv_heads=2,
                          head_dim=32, intermediate=448, vocab=2048, experts=4, experts_active=2,
                          expert_naming="w123", max_position=4096),
    # Qwen3-30B-A3B: h 2048, 32 / 4 heads of 128 (q_dim != h), QK-norm, 128 experts of 768, 8 active, no shared
    # expert; here the first layer keeps a dense MLP (mlp_only_layers) so both kinds of layer are measured.
    "qwen3_moe": ModelShape(id="tiny-qwen3-moe", model_type="qwen3_moe", layers=2, hidden=256, heads=8, kv_heads=2,
                            head_dim=32, intermediate=512, vocab=2048, qk_norm=True, experts=4, experts_active=2,
                            moe_intermediate=128, dense_layers=(0,), max_position=4096),
    # DeepSeek-V3 / Kimi K2: multi-head latent attention (q_lora_rank 1536, kv_lora_rank 512, 128 + 64 query/key
    # head, 128 value head), first layers dense, 256 routed experts of 2048 with 8 active plus one shared expert.
    "deepseek_v3": ModelShape(id="tiny-deepseek-v3", model_type="deepseek_v3", layout="mla", layers=2, hidden=256,
                              heads=8, kv_heads=8, head_dim=48, intermediate=512, vocab=2048, experts=4,
                              experts_active=2, moe_intermediate=128, shared_expert_intermediate=128,
                              dense_layers=(0,), q_lora_rank=64, kv_lora_rank=32, qk_nope_head_dim=32,
                              qk_rope_head_dim=16, v_head_dim=32, max_position=4096),
}

# Families whose tiny model is given as a config.json (the catalog reads it like any other): encoder-decoder and
# vision-language models have no to_hf_config().
RAW_CONFIGS: dict[str, dict[str, Any]] = {
    # Flan-T5 (google/flan-t5-*): gated GELU feed-forward, d_kv 64 with d_model / heads != d_kv, dropout 0.1,
    # relative position buckets 32; 2 encoder and 2 decoder blocks.
    "t5": {"model_type": "t5", "d_model": 256, "d_kv": 32, "d_ff": 640, "num_layers": 2, "num_decoder_layers": 2,
           "num_heads": 6, "vocab_size": 2048, "feed_forward_proj": "gated-gelu", "dropout_rate": 0.1,
           "tie_word_embeddings": False, "relative_attention_num_buckets": 32, "decoder_start_token_id": 0,
           "pad_token_id": 0, "eos_token_id": 1},
    # Qwen2.5-VL-7B: a 32-block ViT of 1280 with a SwiGLU MLP and fused qkv, 2x2 patch merging into the Qwen2.5
    # language model; here 2 blocks of 128 feeding a 2-layer language model of 256.
    "qwen2_5_vl": {"model_type": "qwen2_5_vl", "hidden_size": 256, "intermediate_size": 896, "num_hidden_layers": 2,
                   "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 2048, "image_token_id": 5,
                   "video_token_id": 6, "vision_start_token_id": 7, "vision_end_token_id": 8,
                   "bos_token_id": 1, "eos_token_id": 2,
                   "rope_scaling": {"type": "mrope", "mrope_section": [4, 6, 6]},
                   "vision_config": {"depth": 2, "hidden_size": 128, "intermediate_size": 256, "num_heads": 4,
                                     "out_hidden_size": 256, "patch_size": 14, "spatial_merge_size": 2,
                                     "temporal_patch_size": 2, "window_size": 112, "fullatt_block_indexes": [1]}},
    # Mistral Small 3.1 (mistral3): a 24-layer Pixtral encoder of 1024 (RMSNorms, SwiGLU, 2-D rotary positions)
    # whose 2x2 patches the projector merges into the Mistral language model; here 2 layers of 128 and 2 of 256.
    "mistral3": {"model_type": "mistral3", "image_token_index": 10, "spatial_merge_size": 2,
                 "multimodal_projector_bias": False, "vision_feature_layer": -1, "tie_word_embeddings": False,
                 "text_config": {"model_type": "mistral", "hidden_size": 256, "intermediate_size": 512,
                                 "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
                                 "head_dim": 32, "vocab_size": 2048, "max_position_embeddings": 4096,
                                 "sliding_window": None, "tie_word_embeddings": False},
                 "vision_config": {"model_type": "pixtral", "hidden_size": 128, "intermediate_size": 256,
                                   "num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 32,
                                   "image_size": 1540, "patch_size": 14, "num_channels": 3}},
    # Llama 3.2 11B Vision (mllama): a 32+8-layer tiled encoder of 1280 and cross-attention at every fifth of 40
    # decoder layers; here 2 local + 1 global encoder layers of 64 over 4 tiles of 56 pixels, and cross-attention
    # at layers 1 and 3 of 4.
    "mllama": {"model_type": "mllama", "image_token_index": 2048,
               "text_config": {"model_type": "mllama_text_model", "hidden_size": 256, "intermediate_size": 512,
                               "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
                               "vocab_size": 2048, "cross_attention_layers": [1, 3], "pad_token_id": 0,
                               "bos_token_id": 1, "eos_token_id": 2, "max_position_embeddings": 4096},
               "vision_config": {"model_type": "mllama_vision_model", "hidden_size": 64, "intermediate_size": 128,
                                 "num_hidden_layers": 2, "num_global_layers": 1, "attention_heads": 4,
                                 "image_size": 56, "patch_size": 14, "max_num_tiles": 4, "vision_output_dim": 192,
                                 "intermediate_layers_indices": [0, 1]}},
    # Gemma 3n E4B's language model (AltUp over 4 streams, LAuReL rank 64, per-layer inputs of 256, the last 15 of 35
    # layers sharing keys and values, top-k sparsity in the first 10 feed-forwards); here 10 layers of 128, the last 5
    # sharing, the first 2 sparse.
    "gemma3n_text": {"model_type": "gemma3n_text", "hidden_size": 128, "intermediate_size": 256,
                     "num_hidden_layers": 10, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
                     "vocab_size": 2048, "vocab_size_per_layer_input": 2048, "hidden_size_per_layer_input": 32,
                     "laurel_rank": 16, "altup_num_inputs": 4, "num_kv_shared_layers": 5,
                     "activation_sparsity_pattern": [0.95, 0.95] + [0.0] * 8, "pad_token_id": 0,
                     "bos_token_id": 2, "eos_token_id": 1, "max_position_embeddings": 4096},
    # LLaVA-NeXT (llava-v1.6-mistral-7b-hf): a 24-layer CLIP ViT-L/14 at 336 px, anyres tiles from
    # image_grid_pinpoints and a newline vector, into Mistral 7B; here 2 CLIP layers of 64 over 56-px tiles (4x4
    # patches) and a 2-layer Mistral of 256.
    "llava_next": {"model_type": "llava_next", "image_token_index": 10, "vision_feature_layer": -2,
                   "vision_feature_select_strategy": "default", "tie_word_embeddings": False,
                   "image_grid_pinpoints": [[56, 112], [112, 56], [112, 112]],
                   "text_config": {"model_type": "mistral", "hidden_size": 256, "intermediate_size": 512,
                                   "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
                                   "vocab_size": 2048, "max_position_embeddings": 4096, "sliding_window": None,
                                   "tie_word_embeddings": False},
                   "vision_config": {"model_type": "clip_vision_model", "hidden_size": 64, "intermediate_size": 128,
                                     "num_hidden_layers": 2, "num_attention_heads": 4, "image_size": 56,
                                     "patch_size": 14, "projection_dim": 64}},
}

# Keys transformers needs beyond to_hf_config() for a tiny random model.
CONFIG_EXTRAS: dict[str, dict[str, Any]] = {
    "phi3": {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2},
    "gemma2": {"pad_token_id": 0, "query_pre_attn_scalar": 64},
    "deepseek_v3": {"n_group": 1, "topk_group": 1},
}


def hf_config(family: str) -> dict[str, Any]:
    if family in RAW_CONFIGS:
        return {k: (dict(v) if isinstance(v, dict) else v) for k, v in RAW_CONFIGS[family].items()}
    cfg = to_hf_config(FAMILIES[family])
    cfg.update(CONFIG_EXTRAS.get(family, {}))
    return cfg


def shape_for(family: str) -> ModelShape:
    """The shape as OOM Doctor reads it from the tiny model's config.json."""
    ident = FAMILIES[family].id if family in FAMILIES else f"tiny-{family}"
    return from_hf_config(hf_config(family), id=ident)


@dataclass(frozen=True)
class Cell:
    """One measured configuration."""

    family: str
    method: str = "full"              # full | lora
    dtype: str = "fp32"               # the weights' dtype: fp32 | bf16
    autocast: bool = False            # bf16 mixed precision (Trainer bf16=True)
    optimizer: str = "adamw"          # adamw | sgd_momentum | adafactor
    batch: int = 1
    seq: int = 64
    padded: bool = False              # last row padded (attention_mask zeros), as an unpacked batch is
    grad_checkpointing: bool = False
    attention: str = "sdpa"           # eager | sdpa
    lora_rank: int = 8
    lora_targets: tuple[str, ...] = ("q_proj", "v_proj")
    lora_dropout: float = 0.0
    target: int = 0                   # encoder-decoder models: target tokens per row (source tokens: seq)
    images: int = 0                   # vision-language models: images per row, each of image_side² pixels
    image_side: int = 0
    freeze_vision: bool = False       # the vision tower frozen (LLaMA-Factory's freeze_vision_tower)

    @property
    def name(self) -> str:
        parts = [self.family, self.method, self.dtype + ("+amp" if self.autocast else ""), self.attention,
                 f"b{self.batch}s{self.seq}" + (f"t{self.target}" if self.target else "")
                 + (f"i{self.images}x{self.image_side}" if self.images else "") + ("pad" if self.padded else "")]
        if self.grad_checkpointing:
            parts.append("gc")
        if self.freeze_vision:
            parts.append("frozen-tower")
        if self.optimizer != "adamw":
            parts.append(self.optimizer)
        if self.method == "lora":
            which = "all" if self.lora_targets == ("all-linear",) else (
                "qv" if self.lora_targets in (("q_proj", "v_proj"), ("qkv_proj",)) else "attn")
            parts.append(f"r{self.lora_rank}" + which
                         + (f"d{self.lora_dropout:g}" if self.lora_dropout else ""))
        return "/".join(parts)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["lora_targets"] = list(self.lora_targets)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Cell":
        d = dict(d)
        d["lora_targets"] = tuple(d.get("lora_targets", ("q_proj", "v_proj")))
        return cls(**d)


def setup_for_cell(cell: Cell, shape: ModelShape | None = None) -> Setup:
    """The estimator's Setup for a measured cell.

    ``precision`` is the mixed-precision switch (Trainer ``bf16=True``), so bf16
    weights without autocast are ``load_dtype="bf16", precision="fp32"``.  An
    unpadded batch is what the estimator calls ``packing`` (no padding mask).
    """
    return Setup(
        model=shape or shape_for(cell.family), method=cell.method, load_dtype=cell.dtype,
        precision="bf16" if cell.autocast else "fp32", optimizer=cell.optimizer, batch_size=cell.batch,
        seq_len=cell.seq, grad_checkpointing=cell.grad_checkpointing, attention=cell.attention,
        lora_rank=cell.lora_rank, lora_targets=tuple(cell.lora_targets), lora_dropout=cell.lora_dropout,
        packing=not cell.padded, target_len=cell.target or None,
        images_per_sample=cell.images or None, image_size=cell.image_side or None,
        freeze_vision=cell.freeze_vision,
    )


def estimator_components(setup: Setup) -> dict[str, float]:
    """The estimator's figure for each measured quantity, in bytes."""
    from oomdoctor.estimate import estimate
    from oomdoctor.estimate.activations import activations, compute_dtypes
    from oomdoctor.estimate.logits import logits
    from oomdoctor.estimate.objectives import objective
    from oomdoctor.estimate.optimizer import optimizer_states
    from oomdoctor.estimate.trainable import trainable
    from oomdoctor.estimate.weights import weights
    from oomdoctor.estimate import anatomy

    tr = trainable(setup)
    w = weights(setup, tr)
    opt = optimizer_states(setup, tr)
    rows = objective(setup).rows
    acts = activations(setup, rows)
    p, _, _ = compute_dtypes(setup)
    d = anatomy.dims(setup.model)
    decoder_tokens = (setup.target_len or setup.seq_len) if getattr(setup.model, "encoder_layers", 0) else setup.seq_len
    lg = logits(rows * decoder_tokens, d.vocab, p, True, d.logit_softcap)
    vh = d.vocab * d.hidden
    head = lg.grad + vh * tr.groups[0].dtype_bytes if setup.method == "full" else 0.0
    if setup.method == "full" and acts.weight_copies and tr.groups[0].dtype_bytes == 4 and p == 2:
        head = max(lg.grad + vh * p, vh * (4 + p))      # autocast's half copy's gradient, then its fp32 cast
    est = estimate(setup)
    return {
        "params": w.total,
        "grads": tr.bytes,
        "optimizer": opt.states + opt.master,
        "activations": acts.kept,
        "recompute": acts.recompute,
        "weight_copies": acts.weight_copies,
        "logits_kept": lg.kept,
        "logits_forward": lg.forward,
        # the start of backward: the loss's peak, or later the logits' gradient beside lm_head's weight gradient
        "logits_backward": max(lg.backward, head),
        "forward_peak": est.moments["end of forward"] * GIB,
        "backward_peak": max(est.moments["start of backward"], est.moments["end of backward"]) * GIB,
        "peak": est.allocated_gib * GIB,
    }


@dataclass
class Measured:
    params: float = 0.0
    grads: float = 0.0
    optimizer: float = 0.0
    activations: float = 0.0
    saved: float | None = None      # the same through saved_tensors_hooks (without checkpointing)
    recompute: float = 0.0
    weight_copies: float = 0.0
    logits_kept: float = 0.0
    logits_forward: float = 0.0
    logits_backward: float = 0.0
    lm_head_grad: float = 0.0
    forward_peak: float = 0.0
    backward_peak: float = 0.0
    peak: float = 0.0
    peak_moment: str = ""
    notes: list[str] = field(default_factory=list)
