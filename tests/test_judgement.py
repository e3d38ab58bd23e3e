"""Judgement in ranking (issue #10): what can make it fit comes first, the likeliest cause is treated first,
and causes nobody configured are not blamed."""
from pathlib import Path

import pytest

from oomdoctor.consultation import State, default
from oomdoctor.extractors import sentence

C = default()
CORPUS = Path(__file__).parent / "corpus"


def log(slug):
    return (CORPUS / f"{slug}.log").read_text(encoding="utf-8")


@pytest.mark.parametrize("text", [
    "QLoRA fine-tune of Llama-3-70B in 4-bit on my RTX 4090, CUDA out of memory right away.",
    "想在一张 3090 上用 4bit 量化微调 qwen2.5-72b，一加载就 OOM 了",
])
def test_when_the_weights_alone_exceed_the_card_the_first_remedy_can_make_it_fit(text):
    reply = C.diagnose(text)
    capacity = reply["estimate"]["gpu_capacity_gib"]
    assert reply["estimate"]["breakdown"]["weights"] > capacity
    assert reply["diagnoses"][0]["id"] == "model_too_large_for_gpu"
    ids = [r["id"] for r in reply["remedies"]]
    assert ids[0] in ("bigger_gpu", "more_gpus")
    # Whatever leaves the model states above the card ranks below everything that can make it fit.
    def can_fit(r):
        after = r["breakdown_after"]
        return r["fits_after"] or r["id"] == "bigger_gpu" or (
            after is not None and after["weights"] + after["gradients"] + after["optimizer"] < capacity)
    verdicts = [can_fit(r) for r in reply["remedies"] if r["breakdown_after"] is not None]
    assert verdicts == sorted(verdicts, reverse=True)
    assert not any(can_fit(r) for r in reply["remedies"] if r["id"] == "gradient_checkpointing")


@pytest.mark.parametrize("slug", ["torchtitan-853-nccl-dev-shm-16mb", "mosaicstreaming-493-text-dataset-bus-error-shm",
                                  "pytorch-ciinfra-490-nccl-shm-no-space"])
def test_a_dev_shm_failure_gets_the_shm_size_first(slug):
    reply = C.diagnose(log(slug))
    assert reply["diagnoses"][0]["id"] == "shm_too_small"
    assert reply["remedies"][0]["id"] == "shm_size"


def test_a_bus_error_after_hours_of_training_is_worker_ram_not_the_shm_size():
    text = (" 47%|████▋     | 2350/5000 [3:12:40<3:37:05,  4.92s/it]\nIt ran for hours and then, at step 2351:\n"
            "RuntimeError: DataLoader worker (pid 22918) is killed by signal: Bus error. It is possible that dataloader's "
            "workers are out of shared memory. Please try to raise your shared memory limit.")
    reply = C.diagnose(text)
    assert reply["diagnoses"][0]["id"] == "dataloader_workers"


@pytest.mark.parametrize("text", [
    "Qwen2.5-7B 全参数微调，两张 A100 40G，DDP，batch 1，序列 2048，显存不够",
    "torchrun --nproc_per_node 4 train.py: full fine-tuning Mistral-7B-v0.3 on 4x A100 40GB with the plain HF Trainer, "
    "no DeepSpeed, no FSDP. Every rank OOMs in the first step.",
])
def test_several_ranks_of_full_fine_tuning_without_sharding_name_replication(text):
    reply = C.diagnose(text)
    assert reply["diagnoses"][0]["id"] == "ddp_replication"
    assert reply["remedies"][0]["id"] in ("zero3", "zero_offload")


def test_a_host_oom_while_loading_is_not_blamed_on_an_offload_nobody_configured():
    text = ("DeepSpeed ZeRO stage 3 on 4x A100 80GB; the process is killed for CPU memory while loading the checkpoint "
            "shards.\n\n" + log("deepspeed-5290-70b-zero3-cpu-oom-scales-with-gpus"))
    state, reply = C.take_turn(State(), text)
    assert reply["oom_kind"] == "host"
    assert reply["diagnoses"][0]["id"] != "zero_offload_host_ram"
    assert all(q["id"] != "ask_offload" for q in reply["questions"])


def test_the_cause_a_fused_loss_treats_leads_with_it_though_the_estimator_cannot_price_it():
    reply = C.diagnose("Gemma 2 9B QLoRA on an A100 80GB, seq len 8192, batch 4, gradient checkpointing is on. OOM in the loss.")
    assert reply["diagnoses"][0]["id"] == "logits_large_vocab"
    assert reply["remedies"][0]["id"] == "chunked_loss"


def test_a_remedy_that_sets_what_was_only_assumed_is_offered_for_the_cause_that_doubts_it():
    reply = C.diagnose("Running the MLX lora.py example on Mistral 7B on my 32GB Mac with the default settings.\n\n"
                       + log("mlx-70-lora-fp32-unable-to-allocate"))
    assert reply["diagnoses"][0]["id"] == "fp32_weights_at_load"
    assert reply["remedies"][0]["id"] == "load_in_bf16"


@pytest.mark.parametrize("text, strategy", [
    ("full fine-tuning on 4x A100, no DeepSpeed, no FSDP", None),
    ("torchrun --nproc_per_node 4 train.py, no DeepSpeed, no FSDP", "ddp"),
    ("不用 deepspeed，用 fsdp", "fsdp"),
    ("ZeRO-3 with CPU offload", "deepspeed"),
])
def test_a_denied_mention_states_nothing(text, strategy):
    assert {f.name: f.value for f in sentence.extract(text)}.get("dist.strategy") == strategy
