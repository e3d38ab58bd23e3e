"""Mixture of experts as transformers 5 builds it and peft 0.21 adapts it, checked against the libraries
themselves (tiny models on the meta device; needs torch, transformers and peft)."""
from __future__ import annotations

import warnings

import pytest

from conftest import require

torch = require("torch")
transformers = require("transformers")
peft = require("peft")

from oomdoctor.catalog.hf_config import from_hf_config  # noqa: E402
from oomdoctor.estimate import Setup  # noqa: E402
from oomdoctor.estimate.adapters import place  # noqa: E402
from oomdoctor.estimate.trainable import trainable  # noqa: E402

BASE = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=128, pad_token_id=0)
MOE = {
    "mixtral": dict(BASE, model_type="mixtral", num_local_experts=4, num_experts_per_tok=2),
    "phimoe": dict(BASE, model_type="phimoe", num_local_experts=4, num_experts_per_tok=2),
    "qwen2_moe": dict(BASE, model_type="qwen2_moe", num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                      shared_expert_intermediate_size=48),
    "qwen3_moe": dict(BASE, model_type="qwen3_moe", num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                      head_dim=16, mlp_only_layers=[0]),
    "deepseek_v3": dict(BASE, model_type="deepseek_v3", num_key_value_heads=4, n_routed_experts=4,
                        num_experts_per_tok=2, moe_intermediate_size=32, n_shared_experts=1, first_k_dense_replace=1,
                        kv_lora_rank=16, q_lora_rank=24, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
                        n_group=1, topk_group=1),
    "glm4_moe": dict(BASE, model_type="glm4_moe", n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                     n_shared_experts=1, first_k_dense_replace=1, head_dim=16, n_group=1, topk_group=1),
    "gpt_oss": dict(BASE, model_type="gpt_oss", num_local_experts=4, num_experts_per_tok=2, head_dim=16,
                    intermediate_size=64),
    "llama4_text": dict(BASE, model_type="llama4_text", num_local_experts=4, num_experts_per_tok=1,
                        intermediate_size_mlp=128, head_dim=16, interleave_moe_layer_step=2),
}
TARGETS = [("all-linear",), ("q_proj", "v_proj"), ("gate_proj", "up_proj", "down_proj"), ("gate", "w1", "w2", "w3")]


def _model(cfg):
    kw = {k: v for k, v in cfg.items() if k != "model_type"}
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        return transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(cfg["model_type"], **kw))


@pytest.mark.parametrize("family", sorted(MOE))
def test_parameter_count_equals_transformers(family):
    model = _model(MOE[family])
    assert from_hf_config(MOE[family]).param_count() == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("family", sorted(MOE))
@pytest.mark.parametrize("targets", TARGETS, ids=lambda t: "+".join(t))
def test_lora_trainable_count_equals_peft(family, targets):
    """Where peft puts adapters on a transformers 5 MoE model, and how many parameters they hold (or that peft
    refuses the request)."""
    shape = from_hf_config(MOE[family])
    ours = place(shape, targets, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model = peft.get_peft_model(_model(MOE[family]), peft.LoraConfig(
                r=4, target_modules="all-linear" if targets == ("all-linear",) else list(targets),
                task_type="CAUSAL_LM"))
        except (ValueError, RuntimeError):
            assert ours.conflict or not ours.adapters
            return
    assert not ours.conflict
    assert ours.params == sum(p.numel() for p in model.parameters() if p.requires_grad)


def test_mixtral_all_linear_counts_the_fused_experts():
    """Issue #12's measurement: on Mixtral's shape the trainable count was 27 % above the estimate, because peft
    wraps the fused gate_up_proj at rank 2r and the router too."""
    shape = from_hf_config(MOE["mixtral"])
    setup = Setup(model=shape, method="lora", lora_rank=16, lora_targets=("all-linear",), lora_dropout=0.0)
    model = peft.get_peft_model(_model(MOE["mixtral"]), peft.LoraConfig(
        r=16, target_modules="all-linear", task_type="CAUSAL_LM"))
    assert trainable(setup).params == sum(p.numel() for p in model.parameters() if p.requires_grad)
    with pytest.raises(ValueError, match="dropout"):
        peft.get_peft_model(_model(MOE["mixtral"]), peft.LoraConfig(
            r=16, target_modules="all-linear", lora_dropout=0.05, task_type="CAUSAL_LM"))
