"""The estimate's derivation is keyed lines worded from knowledge/texts.yaml, in English and in Chinese."""
from __future__ import annotations

import re
import string

import pytest

from oomdoctor.catalog import from_hf_config, get_model
from oomdoctor.estimate import Line, Setup, estimate
from oomdoctor.conclusions.sizing import say_derivation
from oomdoctor.knowledge import default

LLAMA = get_model("llama-3-8b")
CHATGLM3 = get_model("chatglm3-6b")
GEMMA2 = get_model("gemma-2-2b")
MIXTRAL = get_model("mixtral-8x7b")
DEEPSEEK_V3 = get_model("deepseek-v3")
QWEN3_VL = get_model("qwen3-vl-2b")
MLLAMA = get_model("llama-3.2-11b-vision")
LLAVA_NEXT = get_model("llava-v1.6-mistral-7b")
# google/flan-t5-base's config.json (the keys the estimate reads)
FLAN_T5 = from_hf_config(
    {"model_type": "t5", "d_model": 768, "d_kv": 64, "d_ff": 2048, "num_layers": 12, "num_decoder_layers": 12,
     "num_heads": 12, "vocab_size": 32128, "feed_forward_proj": "gated-gelu", "dropout_rate": 0.1,
     "tie_word_embeddings": False, "relative_attention_num_buckets": 32}, id="flan-t5-base")

# Set-ups that between them reach every kind of derivation line.
SETUPS = {
    "lora": dict(method="lora"),
    "lora no module": dict(method="lora", lora_targets=("c_attn",)),
    "qlora fsdp": dict(method="qlora", load_dtype="nf4", num_gpus=2, strategy="fsdp"),
    "lora fsdp, units mixing frozen weights and adapters": dict(method="lora", num_gpus=2, strategy="fsdp",
                                                               fsdp_mixed_units=True),
    "qlora fsdp offload": dict(method="qlora", load_dtype="nf4", num_gpus=2, strategy="fsdp", offload_param="cpu",
                               offload_optimizer="cpu"),
    "nf4 single quant": dict(method="qlora", load_dtype="nf4", double_quant=False, grad_checkpointing=True),
    "qlora kbit upcast": dict(method="qlora", load_dtype="nf4", precision="bf16", kbit_fp32_upcast=True),
    "qlora kbit upcast, TRL's bf16 head": dict(method="qlora", load_dtype="nf4", precision="bf16",
                                              kbit_fp32_upcast=True, kbit_head_bf16=True),
    "int8": dict(method="lora", load_dtype="int8"),
    "full fp32 autocast": dict(method="full", load_dtype="fp32", attention="eager", seq_len=256),
    "full adafactor": dict(method="full", optimizer="adafactor", modules_to_save=()),
    "freeze": dict(method="freeze", load_dtype="bf16"),
    "prefix tuning": dict(method="prefix", load_dtype="fp16", virtual_tokens=128),
    "chatglm3 p-tuning v2, projection": dict(model=CHATGLM3, method="prefix", load_dtype="fp16", virtual_tokens=128,
                                             prefix_projection=True),
    "prefix tuning, projection, checkpointing": dict(method="prefix", load_dtype="bf16", virtual_tokens=64,
                                                     prefix_projection=True, grad_checkpointing=True),
    "modules_to_save": dict(method="lora", modules_to_save=("lm_head",)),
    "zero1": dict(method="full", strategy="deepspeed", zero_stage=1, num_gpus=4),
    "zero2 nvme": dict(method="full", load_dtype="fp32", strategy="deepspeed", zero_stage=2, num_gpus=4, offload_optimizer="nvme"),
    "zero3 offload": dict(method="full", strategy="deepspeed", zero_stage=3, num_gpus=4, offload_optimizer="cpu",
                          offload_param="cpu"),
    "ddp": dict(method="full", strategy="ddp", num_gpus=2),
    "fsdp one fp32": dict(method="full", load_dtype="fp32", strategy="fsdp", num_gpus=1),
    "model parallel": dict(method="lora", strategy="model_parallel", num_gpus=2),
    "dpo full": dict(method="full", objective="dpo"),
    "dpo lora": dict(method="lora", objective="dpo"),
    "ppo": dict(method="lora", objective="ppo"),
    "reward": dict(method="lora", objective="reward"),
    "eval whole": dict(method="lora", eval_compute_metrics=True, eval_samples=64),
    "eval accumulated argmax": dict(method="lora", eval_compute_metrics=True, eval_samples=64,
                                    eval_accumulation_steps=2, eval_preprocess_logits=True),
    "generation": dict(method="lora", eval_generate=True, gen_new_tokens=64),
    "gemma2 eager": dict(model=GEMMA2, method="full", attention="eager", seq_len=512),
    "chunked loss": dict(method="full", loss="chunked"),
    "chunked loss compiled": dict(method="lora", loss="chunked", compiled=True),
    "liger": dict(method="full", loss="fused_linear", liger_kernels=True),
    "cut cross-entropy": dict(method="lora", loss="cce"),
    "paged 8-bit states": dict(method="full", optimizer="paged_adamw_8bit"),
    "offload, optimizer in backward": dict(method="full", grad_checkpointing=True, activation_offload=True,
                                           optimizer_in_backward=True),
    "tensor and context parallel": dict(method="lora", num_gpus=4, strategy="fsdp", tensor_parallel=2,
                                        context_parallel=2),
    "grpo generate, reference, reward model": dict(method="full", objective="grpo", gen_new_tokens=256, batch_size=4,
                                                   rl_generations=4, rl_beta=0.04, reward_model=True),
    "grpo zero3": dict(method="full", objective="grpo", strategy="deepspeed", zero_stage=3, num_gpus=4),
    "grpo indivisible generations": dict(method="lora", objective="grpo", rl_generations=8),
    "grpo vllm colocated": dict(method="lora", objective="grpo", vllm="colocate", gpu_memory_gib=80),
    "grpo vllm asleep, share too small": dict(method="lora", objective="grpo", vllm="colocate", vllm_sleep=True,
                                              vllm_memory_share=0.05, gpu_memory_gib=80),
    "rloo vllm, no card": dict(method="lora", objective="rloo", vllm="colocate"),
    "grpo vllm server": dict(method="lora", objective="grpo", vllm="server"),
    "dpo precomputed reference": dict(method="full", objective="dpo", precompute_ref=True),
    "fp8 torchao": dict(method="full", fp8="torchao"),
    "fp8 transformer engine": dict(method="full", fp8="te"),
    "fp8 transformer engine, adapters": dict(method="lora", fp8="te"),
    "moe lora all-linear": dict(model=MIXTRAL, method="lora", lora_targets=("all-linear",), lora_dropout=0.0),
    "moe lora all-linear, checkpointing": dict(model=MIXTRAL, method="lora", lora_targets=("all-linear",),
                                               grad_checkpointing=True),
    "moe load-balancing loss": dict(model=MIXTRAL.replace(output_router_logits=True), method="lora"),
    "moe half a fused pair": dict(model=MIXTRAL, method="lora", lora_targets=("q_proj", "w1")),
    "moe router targeted": dict(model=get_model("gpt-oss-20b"), method="lora", lora_targets=("q_proj", "router")),
    "moe qlora": dict(model=MIXTRAL, method="qlora", load_dtype="nf4"),
    "mla, dense and shared MLPs, all-linear": dict(model=DEEPSEEK_V3, method="lora", lora_targets=("all-linear",),
                                                   seq_len=256),
    "t5 full": dict(model=FLAN_T5, method="full", seq_len=512, target_len=128),
    "vlm full": dict(model=QWEN3_VL, method="full", images_per_sample=2, image_size=448),
    "vlm lora on the language model": dict(model=QWEN3_VL, method="lora"),
    "cross-attention vlm": dict(model=MLLAMA, method="lora", lora_targets=("all-linear",), images_per_sample=2),
    "gemma 3n, bf16 weights": dict(model=get_model("gemma-3n-e4b"), method="lora", load_dtype="bf16",
                                   lora_targets=("all-linear",)),
    "gemma 3n full": dict(model=get_model("gemma-3n-e4b"), method="full", seq_len=512),
    # a LLaVA tower trained in full (its unread last layer keeps no gradient), then frozen
    "llava full": dict(model=LLAVA_NEXT, method="full", image_size=672),
    "llava frozen tower": dict(model=LLAVA_NEXT, method="full", image_size=672, freeze_vision=True),
}


def _estimates():
    for name, kw in SETUPS.items():
        kw = dict(kw)
        yield name, estimate(Setup(model=kw.pop("model", LLAMA), **kw))


def _keys(line: Line) -> set[str]:
    found = {line.key}
    for value in line.params.values():
        for v in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(v, Line):
                found |= _keys(v)
    return found


def _placeholders(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def test_every_line_is_keyed_and_reads_in_both_languages():
    kb = default()
    for name, est in _estimates():
        assert all(isinstance(line, Line) for line in est.derivation), name
        en, zh = say_derivation(est, kb, "en"), say_derivation(est, kb, "zh")
        assert len(en) == len(zh) == len(est.derivation)
        for a, b in zip(en, zh):
            assert a != b, (name, a)
            assert re.search(r"[\u4e00-\u9fff]", b), (name, b)     # the Chinese line is Chinese
            assert "{" not in a and "{" not in b                   # every placeholder filled


def test_every_derivation_text_is_used_and_has_the_same_numbers_in_both_languages():
    kb = default()
    used: set[str] = set()
    for _, est in _estimates():
        for line in est.derivation:
            used |= _keys(line)
    texts = {k: v for k, v in kb.texts.items() if k.startswith("derive.")}
    assert not sorted(k for k in used if k not in kb.texts)
    assert sorted(set(texts) - used - {"derive.join"}) == []        # no dead text
    for key, text in texts.items():
        assert _placeholders(text["en"]) == _placeholders(text["zh"]), key


def test_figures_stay_numbers_and_are_formatted_by_the_text():
    kb = default()
    est = estimate(Setup(model=LLAMA, method="full", load_dtype="fp32", precision="bf16"))
    states = next(line for line in est.derivation if line.key == "derive.estimate.model_states")
    assert states.params["per"] == 16 and isinstance(states.params["gib"], float)
    en = say_derivation(est, kb, "en")
    zh = say_derivation(est, kb, "zh")
    assert any(l.startswith("model states: 16 B per trained parameter") and "119.66 GiB" in l for l in en)
    assert any(l.startswith("模型状态：每个训练参数 16 B") and "119.66 GiB" in l for l in zh)
    peak = [l for l in zh if l.startswith("峰值出现在")]
    assert peak and "优化器状态" in peak[0]        # part and moment names come from part.* and moment.*


@pytest.mark.parametrize("lang, expect", [("en", "activations:"), ("zh", "激活值：")])
def test_the_estimate_endpoint_words_the_derivation_in_the_reply_language(lang, expect):
    from oomdoctor.named_inputs import estimate_reply

    reply = estimate_reply({"model": "llama3-8b", "method": "lora", "gpu": "4090"}, lang)
    assert any(line.startswith(expect) for line in reply["estimate"]["derivation"])
