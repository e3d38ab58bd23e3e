"""Prefix tuning (P-tuning v2) against peft's own PrefixEncoder on a tiny Llama (CPU, random weights).

peft 0.21 builds the prefix as a KV cache handed to every layer; the estimator's trainable count, its
optimizer states and the layers' saved tensors are held against what peft and torch really make.
Layer 1 is compared, as in test_estimate_measured (layer 0 holds the tensors shared by all layers).
"""
from __future__ import annotations

import pytest

from conftest import require

torch = require("torch")
transformers = require("transformers")
peft = pytest.importorskip("peft")

from oomdoctor.estimate import Setup, anatomy  # noqa: E402
from oomdoctor.estimate import activations as acts  # noqa: E402
from oomdoctor.estimate.optimizer import optimizer_states  # noqa: E402
from oomdoctor.estimate.trainable import trainable  # noqa: E402
from test_estimate import TINY  # noqa: E402

B, S, N, HIDDEN = 2, 64, 16, 64


def _model(attn: str, projection: bool):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=TINY.hidden, intermediate_size=TINY.intermediate,
                                   num_attention_heads=TINY.heads, num_key_value_heads=TINY.kv_heads,
                                   num_hidden_layers=TINY.layers, vocab_size=TINY.vocab)
    cfg._attn_implementation = attn
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    extra = {"encoder_hidden_size": HIDDEN} if projection else {}
    config = peft.PrefixTuningConfig(task_type="CAUSAL_LM", num_virtual_tokens=N, prefix_projection=projection, **extra)
    model = peft.get_peft_model(model, config)
    model.train()
    return model


def _setup(attn: str, projection: bool, **kw) -> Setup:
    kw.setdefault("virtual_tokens", N)
    return Setup(model=TINY, method="prefix", prefix_projection=projection,
                 prefix_hidden=HIDDEN if projection else None, batch_size=B, seq_len=S, load_dtype="bf16",
                 precision="fp32", attention=attn, **kw)


@pytest.mark.parametrize("projection", [False, True])
def test_parameters_trainable_count_and_dtype_are_peft_s(projection):
    model = _model("sdpa", projection)
    setup = _setup("sdpa", projection)
    tr = trainable(setup)
    trained = [p for p in model.parameters() if p.requires_grad]
    assert sum(p.numel() for p in trained) == tr.params
    assert sum(p.numel() for p in model.parameters() if not p.requires_grad) == anatomy.total_params(TINY)
    assert {p.element_size() for p in trained} == {g.dtype_bytes for g in tr.groups} == {4}


@pytest.mark.parametrize("projection", [False, True])
def test_adamw_states_after_one_step_are_the_estimate(projection):
    model = _model("sdpa", projection)
    ids = torch.randint(0, TINY.vocab, (B, S))
    model(input_ids=ids, labels=ids).loss.backward()
    trained = [p for p in model.parameters() if p.requires_grad]
    assert all(p.grad is not None for p in trained)             # every prefix tensor gets a gradient
    opt = torch.optim.AdamW(trained, foreach=True)
    opt.step()
    states = sum(v.numel() * v.element_size() for st in opt.state.values() for v in st.values() if v.dim() > 0)
    setup = _setup("sdpa", projection)
    assert states == optimizer_states(setup, trainable(setup)).states


def _saved_per_token(model, layer_index: int) -> float:
    skip = {p.untyped_storage().data_ptr() for p in model.parameters()}
    skip |= {b.untyped_storage().data_ptr() for b in model.buffers()}
    layers = [m for m in model.modules() if type(m).__name__ == "LlamaDecoderLayer"]
    where: list = ["model"]

    def leave(module, args, out):
        where.pop()             # a forward hook that returns a value replaces the layer's output

    for i, layer in enumerate(layers):
        layer.register_forward_pre_hook(lambda module, args, i=i: where.append(i))
        layer.register_forward_hook(leave)
    per_layer: dict = {}
    seen = set()

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in skip and st.data_ptr() not in seen:
            seen.add(st.data_ptr())
            per_layer[where[-1]] = per_layer.get(where[-1], 0) + st.nbytes()
        return t

    ids = torch.randint(0, TINY.vocab, (B, S))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids, labels=ids)
    return per_layer[layer_index] / (B * S)


def _formula(setup: Setup) -> float:
    c = acts.context(setup)
    base = sum(b for *_, b in acts.layer_items(c)) + acts.attention_per_position(c) * S
    prefix, _, _ = acts.prefix_activations(c, setup, B)
    return base + prefix / c.trained_layers / (B * S)


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_a_layer_saves_what_the_estimate_says_with_the_prefix_in_its_keys_and_values(attn):
    measured = _saved_per_token(_model(attn, False), 1)
    with_prefix = _formula(_setup(attn, False))
    assert measured == pytest.approx(with_prefix, rel=0.05)
    # the prefix's share is real: without it the estimate is further off than the tolerance
    without = _formula(_setup(attn, False, virtual_tokens=1))
    assert abs(measured - without) > abs(measured - with_prefix)


def test_prefix_tuning_keeps_optimizer_states_for_the_prefix_only_not_for_every_weight():
    from oomdoctor.estimate import estimate
    from test_estimate import LLAMA3_8B

    prefix = estimate(Setup(model=LLAMA3_8B, method="prefix", load_dtype="bf16", virtual_tokens=128))
    full = estimate(Setup(model=LLAMA3_8B, method="full", load_dtype="bf16"))
    n = 128 * 32 * 2 * 1024
    assert prefix.trainable_params == n
    assert prefix.breakdown["optimizer"] * 2**30 == pytest.approx(8 * n, rel=1e-6)
    assert prefix.per_gpu_gib < full.per_gpu_gib / 2


# ---------------------------------------------------------------- read from pasted text, named inputs, what-ifs

CHATGLM_PTUNING = """PRE_SEQ_LEN=128
LR=2e-2
torchrun --standalone --nnodes=1 --nproc-per-node=1 ptuning/main.py --do_train --train_file AdvertiseGen/train.json \\
    --model_name_or_path THUDM/chatglm2-6b --output_dir output/adgen-chatglm2-6b-pt --max_source_length 64 \\
    --max_target_length 128 --per_device_train_batch_size 1 --gradient_accumulation_steps 16 --max_steps 3000 \\
    --learning_rate $LR --pre_seq_len $PRE_SEQ_LEN --prefix_projection
torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB"""

PEFT_PREFIX = """config = PrefixTuningConfig(task_type="CAUSAL_LM", num_virtual_tokens=30)
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf", torch_dtype=torch.bfloat16)
model = get_peft_model(model, config)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 500.00 MiB."""

# peft's prompt tuning also has num_virtual_tokens, at the input only: not prefix tuning.
PEFT_PROMPT = """config = PromptTuningConfig(task_type="CAUSAL_LM", num_virtual_tokens=8, prompt_tuning_init="TEXT",
    prompt_tuning_init_text="Classify:", tokenizer_name_or_path="meta-llama/Llama-2-7b-hf")
model = get_peft_model(model, config)"""


def _facts(text: str) -> dict:
    from oomdoctor.consultation import default

    reply = default().diagnose(text)
    return {f["name"]: f["value"] for f in reply["facts"]}, reply


@pytest.mark.parametrize("text, tokens, projection", [(CHATGLM_PTUNING, 128, True), (PEFT_PREFIX, 30, None)],
                         ids=["chatglm ptuning", "peft PrefixTuningConfig"])
def test_a_pasted_prefix_tuning_run_is_read_and_estimated_as_prefix_tuning(text, tokens, projection):
    facts, reply = _facts(text)
    assert facts.get("train.method") == "prefix"
    assert facts.get("prefix.virtual_tokens") == tokens
    assert facts.get("prefix.projection") is projection
    assert any("P-tuning v2" in line and f"{tokens} virtual tokens" in line for line in reply["estimate"]["derivation"])


def test_prompt_tuning_s_virtual_tokens_are_not_read_as_a_prefix():
    facts, _ = _facts(PEFT_PROMPT)
    assert facts.get("train.method") not in ("prefix", "lora")
    assert "prefix.virtual_tokens" not in facts


@pytest.mark.parametrize("text", ["I'm running P-tuning v2 on Qwen2-7B on a 4090 and it runs out of memory",
                                  "用前缀微调训练 Qwen2-7B，4090 显存不够"])
def test_prefix_tuning_named_in_a_sentence(text):
    facts, _ = _facts(text)
    assert facts.get("train.method") == "prefix"


@pytest.mark.parametrize("text", ["LoRA on Qwen2-7B runs out of memory on a 4090. Should I try prefix tuning instead?",
                                  "Qwen2-7B full fine-tuning OOMs on my 4090; would P-tuning v2 fit?",
                                  "4090 全参训 Qwen2-7B 爆显存，要不要改用 P-tuning v2"])
def test_prefix_tuning_weighed_not_run_is_no_method(text):
    facts, _ = _facts(text)
    assert facts.get("train.method") != "prefix"


def test_named_inputs_take_the_prefix_and_the_lora_what_if_still_applies():
    from oomdoctor.named_inputs import EstimateInputError, estimate_reply

    base = {"model": "llama-3-8b", "gpu": "rtx-4090", "seq_len": 1024}
    small = estimate_reply({**base, "method": "prefix", "virtual_tokens": 16}, "zh")
    big = estimate_reply({**base, "virtual_tokens": 512, "prefix_projection": True}, "en")
    assert {"name": "train.method", "value": "prefix"} in big["facts"]              # implied by the prefix's size
    assert big["estimate"]["per_gpu_gib"] > small["estimate"]["per_gpu_gib"]
    assert any("前缀微调" in line for line in small["estimate"]["derivation"])
    with pytest.raises(EstimateInputError):
        estimate_reply({**base, "method": "lora", "virtual_tokens": 16})
    full = estimate_reply({**base, "method": "full"}, "en")
    assert small["estimate"]["per_gpu_gib"] < full["estimate"]["per_gpu_gib"] / 2
    assert "use_lora" in {w["remedy"] for w in full["whatif"]}


def test_chatglm3_s_own_prefix_encoder_projects_through_the_hidden_size():
    """modeling_chatglm.py (ChatGLM2/3): Embedding(pre_seq_len, kv_size), Linear(kv_size, hidden), Linear(hidden,
    kv_size), kv_size = num_layers × kv_channels × multi_query_group_num × 2; without projection the embedding alone."""
    from oomdoctor.catalog import get_model

    glm = get_model("chatglm3-6b")
    kv_size = 28 * 128 * 2 * 2
    plain = trainable(Setup(model=glm, method="prefix", load_dtype="fp16", virtual_tokens=128))
    projected = trainable(Setup(model=glm, method="prefix", load_dtype="fp16", virtual_tokens=128,
                                prefix_projection=True))
    assert plain.params == 128 * kv_size
    assert projected.params == 128 * kv_size + (kv_size * 4096 + 4096) + (4096 * kv_size + kv_size)


def test_chatglm_efficient_tuning_s_p_tuning_is_prefix_tuning():
    facts, _ = _facts("python src/train_sft.py --do_train --model_name_or_path THUDM/chatglm2-6b --finetuning_type p_tuning "
                      "--prefix_projection --per_device_train_batch_size 4 --fp16\n"
                      "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.")
    assert facts.get("train.method") == "prefix" and facts.get("prefix.projection") is True
