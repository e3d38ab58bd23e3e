"""Consultations end to end without HTTP: questions, answers, reports, both languages."""
from pathlib import Path

import pytest

from oomdoctor.consultation import State, default

LOGS = Path(__file__).parent / "fixtures" / "logs"
C = default()


def log(name):
    return (LOGS / name).read_text()


def turn(state, message, lang=None):
    return C.take_turn(state, message, lang)


def test_traceback_without_config_gets_one_question_first():
    state, reply = turn(State(), log("cuda_oom_new.txt"))
    assert reply["status"] == "question"
    assert reply["oom_kind"] == "gpu"
    (q,) = reply["questions"]
    assert q["id"] == "ask_model" and q["why"] and q["options"]
    assert state.pending == "ask_model"
    facts = {f["name"]: f for f in reply["facts"]}
    assert facts["oom.tried_gib"]["value"] == pytest.approx(1.96)
    assert facts["oom.tried_gib"]["source"]["kind"] == "extractor"
    assert facts["phase"]["value"] == "backward"


def test_free_text_answer_with_several_facts_then_report():
    state, reply = turn(State(), log("cuda_oom_new.txt"))
    state, reply = turn(state, "Llama-3-8B, LoRA, batch size 4, seq len 2048")
    asked = set(state.asked)
    # Nothing already known is asked again.
    for _ in range(3):
        if reply["status"] == "report":
            break
        assert reply["questions"][0]["id"] not in asked - {state.pending}
        state, reply = turn(state, "skip")
    assert reply["status"] == "report"
    assert reply["oom_kind"] == "gpu"
    est = reply["estimate"]
    assert est is not None and set(est["breakdown"]) == {"weights", "gradients", "optimizer", "activations", "logits", "rollouts", "overhead"}
    assert est["gpu_capacity_gib"] == pytest.approx(23.65)
    assert reply["remedies"]
    for remedy in reply["remedies"]:
        assert remedy["change"]
    assert any(r["estimate_after_gib"] is not None for r in reply["remedies"])
    facts = {f["name"]: f for f in reply["facts"]}
    assert facts["model.name"]["value"] == "llama-3-8b"
    assert facts["model.name"]["source"]["kind"] == "answer"


def test_chinese_answer_switches_to_chinese():
    state, reply = turn(State(), log("cuda_oom_new.txt"))
    assert reply["lang"] == "en"
    state, reply = turn(state, "模型是 Qwen2.5-7B，全参数微调，序列长度 2048，batch 2")
    assert reply["lang"] == "zh"
    while reply["status"] == "question":
        state, reply = turn(state, "不知道")
    assert reply["status"] == "report"
    assert any("\u4e00" <= ch <= "\u9fff" for ch in reply["diagnoses"][0]["title"])


def test_skip_marks_unknown_and_is_not_asked_again():
    state, reply = turn(State(), log("cuda_oom_new.txt"))
    first = reply["questions"][0]["id"]
    state, reply = turn(state, "don't know")
    assert "model.name" in state.unknown
    assert not reply["questions"] or reply["questions"][0]["id"] != first


def test_questions_are_bounded():
    state, reply = turn(State(), log("cuda_oom_new.txt"))
    count = 0
    while reply["status"] == "question":
        count += 1
        state, reply = turn(state, "skip")
        assert count <= 3
    assert reply["assumptions"]


def test_option_value_answers_directly():
    state, reply = turn(State(), log("cuda_oom_new.txt"))
    state, reply = turn(state, "llama-3-8b")
    assert {f["name"]: f["value"] for f in reply["facts"]}["model.name"] == "llama-3-8b"


def test_sentence_estimate_with_assumptions():
    reply = C.diagnose("LLaMA-3-8B + LoRA + batch_size=4")
    assert reply["status"] == "report"
    est = reply["estimate"]
    assert est["per_gpu_gib"] > 15
    assert est["breakdown"]["weights"] == pytest.approx(8.03e9 * 2 / 2**30, rel=0.02)
    texts = " ".join(a["text"] for a in reply["assumptions"])
    assert "2048" in texts or "sequence" in texts.lower()


def test_qwen_full_a100_40g_chinese_does_not_fit_and_says_what_would():
    reply = C.diagnose("Qwen2.5-7B 全参数微调 A100 40G")
    assert reply["lang"] == "zh"
    est = reply["estimate"]
    assert est["fits"] is False
    assert est["gpu_capacity_gib"] == pytest.approx(40, abs=1.5)
    fixes = [r for r in reply["remedies"] if r["fits_after"]]
    assert fixes, reply["remedies"]
    assert "放不下" in reply["text"]


@pytest.mark.parametrize("name, kind, scenario", [
    ("oom_killer.txt", "host", "host_oom_killer"),
    ("bad_alloc.txt", "host", "host_oom_killer"),
    ("dataloader_killed.txt", "host", "dataloader_workers"),
    ("zero_offload.txt", "host", "zero_offload_host_ram"),
    ("nccl_timeout.txt", "not_memory", "nccl_timeout"),
    ("illegal_access.txt", "not_memory", "illegal_memory_access"),
    ("disk_full.txt", "not_memory", "disk_full"),
])
def test_kinds_and_scenarios(name, kind, scenario):
    reply = C.diagnose(log(name))
    assert reply["oom_kind"] == kind
    assert reply["diagnoses"][0]["id"] == scenario
    assert reply["diagnoses"][0]["why"]


def test_diagnosis_explains_rules_and_fact_sources():
    reply = C.diagnose(log("oom_killer.txt"))
    trace = reply["diagnoses"][0]["trace"][0]
    assert trace["rule"]
    sources = {f["source"]["kind"] for f in trace["facts"]}
    assert sources & {"rule", "extractor"}


def test_claims_are_corrected_with_live_figures():
    reply = C.diagnose("Llama-3-70B QLoRA on one RTX 4090")
    claim = next(c for c in reply["claims"] if c["id"] == "qlora_70b_24gb")
    assert "{" not in claim["truth"]
    assert reply["estimate"]["fits"] is False


EVAL_OOM = ("TrainingArguments(per_device_train_batch_size=8, per_device_eval_batch_size=32, eval_strategy='steps', bf16=True)\n"
            "model: mistral 7b lora\nRuntimeError: CUDA out of memory. Tried to allocate 3.91 GiB (GPU 0; 39.39 GiB total "
            "capacity; 33.12 GiB already allocated; 2.10 GiB free; 35.20 GiB reserved in total by PyTorch)\n"
            '  File "trainer.py", line 3000, in evaluation_loop\n    logits = nested_concat(all_logits, logits)')


def test_eval_failure_keeps_eval_remedies_and_plans_with_fact_references():
    reply = C.diagnose(EVAL_OOM)
    assert reply["diagnoses"][0]["id"] == "eval_logits_accumulation"
    ids = [r["id"] for r in reply["remedies"]]
    assert ids[0] == "eval_accumulation_steps"
    # The what-if "eval batch = train batch" resolves to a number, in the change and in the estimate.
    small = next(r for r in reply["remedies"] if r["id"] == "eval_batch_size_small")
    assert small["change"]["training_args"]["per_device_eval_batch_size"] == 8
    # The failure was in evaluation, which is not the step's peak: its own figure is stated, and each remedy's
    # effect on it; ranking weighs what a remedy saves there, so training-only remedies come after.
    failed = reply["estimate"]["failed_moment"]
    assert failed["name"] == "evaluation" and failed["gib"] < reply["estimate"]["per_gpu_gib"]
    assert "evaluation, where it failed" in failed["text"] and failed["text"] in reply["text"]
    after = {r["id"]: r["failed_moment_after_gib"] for r in reply["remedies"]}
    assert after["eval_accumulation_steps"] < failed["gib"] / 2
    assert after["gradient_checkpointing"] == failed["gib"]
    assert ids.index("eval_batch_size_small") < ids.index("gradient_checkpointing")
    plan = reply["plans"][0]
    assert plan["fits_after"] and plan["estimate_after_gib"] < 39.39


def test_chinese_counts_and_card_numbers():
    reply = C.diagnose("用 qwen2.5-14b 做 lora，两张 3090，batch 2，序列 4096，显存不够")
    facts = {f["name"]: f["value"] for f in reply["facts"]}
    assert facts["gpu.name"] == "rtx-3090" and facts["dist.num_gpus"] == 2 and facts["train.seq_len"] == 4096
    # Each 24 GB card holds the whole 14B model in bf16 (~29.5 GB): issue #10 wants a remedy that can make it fit
    # first, never gradient checkpointing.
    assert reply["estimate"]["breakdown"]["weights"] > reply["estimate"]["gpu_capacity_gib"]
    first = reply["remedies"][0]
    assert first["id"] != "gradient_checkpointing"
    assert first["breakdown_after"]["weights"] < reply["estimate"]["gpu_capacity_gib"]


def test_enum_values_read_as_words_in_each_language():
    zh = C.diagnose(log("cuda_oom_new.txt"), lang="zh")
    why = " ".join(w for d in zh["diagnoses"] for w in d["why"])
    assert "反向传播" in why and "backward" not in why
    en = C.diagnose(log("cuda_oom_new.txt"))
    assert "backward pass" in " ".join(w for d in en["diagnoses"] for w in d["why"])


def test_what_the_estimator_took_for_granted_is_shown_in_each_language():
    en = C.diagnose("Qwen2.5-7B QLoRA on a 4090, batch 2, seq 2048, CUDA out of memory")
    zh = C.diagnose("Qwen2.5-7B QLoRA 4090 batch 2 序列 2048 CUDA out of memory", lang="zh")
    en_texts = [a["text"] for a in en["assumptions"]]
    assert "caching-allocator reserve assumed 10% of allocated memory" in en_texts
    assert any(t.startswith("NF4 with double quantisation") for t in en_texts)
    assert "假设缓存分配器额外保留已分配显存的 10%" in [a["text"] for a in zh["assumptions"]]
    assert not any(ch.isascii() and ch.isalpha() for t in [a["text"] for a in zh["assumptions"]]
                   if t.startswith("假设缓存") for ch in t.replace("GiB", ""))


@pytest.mark.parametrize("said", [
    'device_map="auto" over 4 GPUs, CUDA out of memory on GPU 3 while the other GPUs are almost empty',
    'gemma-3-27b 4bit + LoRA，device_map="balanced"，8 张 A10G，第一步训练就是最后一张卡显存爆了，其他几张卡几乎是空的',
])
def test_one_card_full_under_a_device_map_is_the_placement(said):
    # One process drives every card under device_map: the cause is the placement, not a rank with more work.
    _, reply = C.take_turn(State(), said, allow_questions=False)
    top = reply["diagnoses"][0]
    assert top["id"] == "device_map_imbalance" and top["trace"][0]["rule"] == "gpu_device_map_one_card_full"
    assert reply["remedies"][0]["id"] == "max_memory_map"


@pytest.mark.parametrize("sentence, model_id, total_params, lang", [
    # models the catalog gained from config.json copies: the sentence names them, the estimate counts their weights
    ("bloomz-560m full fine-tuning, batch 8, seq len 1024 on a T4: CUDA out of memory", "bloom-560m", 559_214_592, "en"),
    ("google/flan-t5-large full fine-tuning, batch 16, V100 16GB, CUDA out of memory", "flan-t5-large", 750_251_008, "en"),
    ("LoRA on flan-t5-xxl, batch 4, one A100 80GB", "t5-v1_1-xxl", 11_003_736_064, "en"),
    ("用 DeepSeek-R1-Distill-Llama-8B 做 LoRA 微调, 4090, batch 2, 序列长度 4096, 爆显存",
     "deepseek-r1-distill-llama-8b", 8_030_261_248, "zh"),
    ("DeepSeek-R1-Distill-Qwen-7B 全参数微调, 8 张 A100 80G, ZeRO-3", "deepseek-r1-distill-qwen-7b", 7_615_616_512, "zh"),
    ("SmolLM3-3B full fine-tuning with batch 4 and seq len 8192 on one 4090", "smollm3-3b", 3_075_098_624, "en"),
    ("DPO on EleutherAI/pythia-410m, batch 8, seq 1024, T4 16GB: CUDA out of memory", "pythia-410m", 405_334_016, "en"),
    ("Devstral-Small-2507 QLoRA 微调, 一张 A100 80G, batch 1, 序列 32768", "devstral-small-2507", 23_572_403_200, "zh"),
])
def test_a_sentence_naming_a_catalog_model_is_estimated_with_its_architecture(sentence, model_id, total_params, lang):
    reply = C.diagnose(sentence)
    assert reply["lang"] == lang
    assert {f["name"]: f["value"] for f in reply["facts"]}["model.name"] == model_id
    assert reply["estimate"]["total_params"] == total_params


@pytest.mark.parametrize("text", [
    "gemma-2-9b full finetune with deepspeed zero2 on 4x A100 40GB, bs 8 seq 1024 -> CUDA OOM in optimizer.step()",
    "Qwen2.5-7B 全参微调，2 张 A100 40G，deepspeed zero2，batch 8，序列长度 2048，报错在优化器更新时 CUDA out of memory",
])
def test_a_failure_in_the_optimizer_step_is_judged_at_that_moment(text):
    reply = C.diagnose(text)
    ids = [d["id"] for d in reply["diagnoses"]]
    # Backward had freed the activations and the logits: a failure here says they fitted.
    assert ids[0] == "optimizer_states"
    assert "activations_too_large" not in ids and "logits_large_vocab" not in ids
    failed = reply["estimate"]["failed_moment"]
    assert failed["name"] == "optimizer step" and failed["gib"] < reply["estimate"]["per_gpu_gib"]
    capacity = reply["estimate"]["gpu_capacity_gib"]
    first = reply["remedies"][0]
    # The first remedy makes the moment that failed fit, and says so, though the assumed activation peak does not.
    assert first["failed_moment_after_gib"] <= capacity and first["fits_after"] is True
    assert first["estimate_after_gib"] > capacity
    assert "so the forward and backward passes fitted" in reply["text"] or "说明前向和反向传播都放得下" in reply["text"]
    # No card or batch searched against the activation peak the failure contradicts.
    assert reply["estimate"]["smallest_gpu"] is None and reply["estimate"]["max_batch_size"] is None


def test_qlora_weights_over_the_card_say_so_and_rank_what_can_fit():
    reply = C.diagnose((Path(__file__).parent / "fixtures" / "rules" / "qlora_70b_one_24g_card.txt").read_text())
    top = reply["diagnoses"][0]
    assert top["id"] == "model_too_large_for_gpu" and top["confidence"] >= 0.9
    assert any("4 bits" in why for why in top["why"])
    ids = [r["id"] for r in reply["remedies"]]
    # Only more cards or a larger one can hold 37 GiB of 4-bit weights; ZeRO-3 on the one card only adds to it.
    assert set(ids[:2]) == {"more_gpus", "bigger_gpu"} and "zero3" not in ids
    more = next(r for r in reply["remedies"] if r["id"] == "more_gpus")
    assert "--num_processes 2 " in more["change"]["launch"]
    # A larger card lowers no moment of the step, yet with checkpointing or offloading it is what fits.
    assert any("bigger_gpu" in plan["remedies"] and plan["fits_after"] for plan in reply["plans"])
