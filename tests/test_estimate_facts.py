"""From facts to a set-up (defaults become assumptions) and from an estimate back to facts."""
from __future__ import annotations

import json

import pytest

from oomdoctor.estimate import COMPONENTS, estimate, estimate_facts, setup_from_facts
from oomdoctor.estimate.from_facts import load_defaults
from test_estimate import LLAMA3_8B, LLAMA3_70B

LLAMA3_8B_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "vocab_size": 128256, "tie_word_embeddings": False, "rms_norm_eps": 1e-05, "torch_dtype": "bfloat16",
    "max_position_embeddings": 8192, "rope_theta": 500000.0,
}


def test_defaults_file_is_complete_and_bilingual():
    defaults = load_defaults()
    assert defaults
    for d in defaults:
        assert d.text["en"].strip() and d.text["zh"].strip()
    facts = {d.fact for d in defaults}
    assert {"train.seq_len", "train.batch_size", "model.load_dtype", "train.method", "lora.rank"} <= facts


def test_each_default_used_becomes_an_assumption():
    s, notes = setup_from_facts({"train.method": "lora"}, shape=LLAMA3_8B)
    by_fact = {n.fact: n for n in notes}
    assert s.seq_len == 2048 and by_fact["train.seq_len"].value == 2048
    assert by_fact["train.seq_len"].say("en") == "sequence length assumed 2048 tokens"
    assert by_fact["train.seq_len"].say("zh") == "假设序列长度为 2048 个 token"
    assert s.load_dtype == "bf16" and "model.load_dtype" in by_fact
    assert s.lora_rank == 8 and s.lora_targets == ("q_proj", "v_proj")
    assert "train.method" not in by_fact


def test_stated_facts_are_not_assumed():
    s, notes = setup_from_facts({"train.method": "full", "model.load_dtype": "bf16", "train.batch_size": 2,
                                 "train.seq_len": 512, "gpu.memory_gib": 80.0}, shape=LLAMA3_8B)
    assert (s.batch_size, s.seq_len, s.gpu_memory_gib) == (2, 512, 80.0)
    assert not {"train.batch_size", "train.seq_len", "model.load_dtype"} & {n.fact for n in notes}
    assert not any(n.fact.startswith("lora.") for n in notes)


def test_qlora_implies_nf4():
    s, notes = setup_from_facts({"train.method": "qlora"}, shape=LLAMA3_70B)
    assert s.load_dtype == "nf4"
    s, notes = setup_from_facts({"train.method": "qlora", "model.load_dtype": "bf16"}, shape=LLAMA3_70B)
    assert s.load_dtype == "nf4" and any(n.fact == "model.load_dtype" for n in notes)
    s, _ = setup_from_facts({"model.load_dtype": "nf4"}, shape=LLAMA3_70B)
    assert s.method == "qlora"


def test_full_without_dtype_is_fp32_as_transformers_4_loads_it():
    s, notes = setup_from_facts({"train.method": "full"}, shape=LLAMA3_8B)
    assert s.load_dtype == "fp32"
    note = next(n for n in notes if n.fact == "model.load_dtype")
    assert "fp32" in note.say("en") and "torch_dtype" in note.say("en")


def test_lora_facts_imply_lora():
    s, _ = setup_from_facts({"lora.rank": 64}, shape=LLAMA3_8B)
    assert s.method == "lora" and s.lora_rank == 64


def test_unknown_model_returns_none():
    s, notes = setup_from_facts({"train.method": "lora", "model.name": "no-such-model-xyz-zz"})
    assert s is None


def test_unknown_model_with_a_size_in_its_name_is_estimated_from_the_name():
    s, notes = setup_from_facts({"train.method": "lora", "model.name": "no-such-model-xyz-123b-zz"})
    assert s is not None and abs(s.model.param_count() / 1e9 - 123) < 123 * 0.05
    said = [n.text["en"] for n in notes if n.fact == "model.name"]
    assert said and "config.json" in said[0] and "123B" in said[0]


def test_model_from_config_json_and_catalog():
    pytest.importorskip("oomdoctor.catalog")
    s, _ = setup_from_facts({"model.config": json.dumps(LLAMA3_8B_CONFIG), "train.method": "lora"})
    if s is None:
        pytest.skip("the catalog cannot read this config yet")
    assert s.model.param_count() == 8_030_261_248


def test_estimate_facts():
    s, _ = setup_from_facts({"train.method": "full", "gpu.memory_gib": 80.0, "train.batch_size": 1},
                            shape=LLAMA3_8B)
    facts = estimate_facts(estimate(s))
    assert facts["estimate.fits"] is False
    assert facts["estimate.dominant"] in COMPONENTS and facts["estimate.dominant"] == "optimizer"
    assert facts["estimate.fp32_master"] is True
    assert 0 < facts["estimate.optimizer_share"] < 1
    assert facts["estimate.weights_exceed_gpu"] is False
    no_gpu = estimate_facts(estimate(s.replace(gpu_memory_gib=None)))
    assert "estimate.fits" not in no_gpu and "estimate.weights_exceed_gpu" not in no_gpu
    big = estimate_facts(estimate(s.replace(model=LLAMA3_70B, gpu_memory_gib=24.0)))
    assert big["estimate.weights_exceed_gpu"] is True


def test_full_fine_tuning_of_a_quantised_load_becomes_qlora():
    s, notes = setup_from_facts({"train.method": "full", "model.load_dtype": "nf4"}, shape=LLAMA3_8B)
    assert s.method == "qlora" and s.lora_targets == ("q_proj", "v_proj")
    assert any(n.fact == "train.method" and n.value == "qlora" for n in notes)


def test_a_count_of_zero_in_a_config_is_set_aside_not_a_crash():
    s, notes = setup_from_facts({"train.batch_size": 0, "eval.num_beams": 0, "eval.samples": -3,
                                 "train.method": "lora"}, shape=LLAMA3_8B)
    assert s.batch_size == 1 and s.gen_beams == 1 and s.eval_samples is None      # the defaults
    ignored = {n.fact for n in notes if "not a positive count" in n.say("en")}
    assert ignored == {"train.batch_size", "eval.num_beams", "eval.samples"}
    assert all("不是正整数" in n.say("zh") for n in notes if "not a positive count" in n.say("en"))


def test_a_zero_batch_in_a_pasted_config_is_answered_not_a_server_error():
    from app import app
    reply = app.test_client().post("/api/v1/diagnose", json={
        "message": "TrainingArguments(per_device_train_batch_size=0)\nLlama-3-8B LoRA on a 4090, CUDA out of memory"})
    assert reply.status_code == 200
    assert any("per_device" in a["text"] or "batch_size" in a["text"] for a in reply.get_json()["assumptions"])
