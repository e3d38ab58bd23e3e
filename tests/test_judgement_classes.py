"""Which diagnosis and which remedy come first, by the principle an expert applies, in wordings of our own.

Each principle is tested where it applies and beside a near miss where the old answer must stay: the frame that
allocated names the mechanism; a request as large as the whole model is a model state; what GRPO adds is its
completions, and a reference model needs evidence; fragmentation needs a material share or a run that had been going;
which moment failed decides what evaluation left behind; a machine going down is host RAM; Errno 28 beside a disk
with room or in a default container is shared memory; several processes on GPU 0 are ranks without their own device;
adapters are another run for continued pre-training.
"""
from __future__ import annotations

import pytest

from oomdoctor import consultation

C = consultation.default()


def ids(reply: dict, key: str) -> list[str]:
    return [item["id"] for item in reply[key]]


def facts(reply: dict) -> dict:
    return {f["name"]: f["value"] for f in reply["facts"]}


def old_oom(tried: str, total: str, allocated: str, free: str, reserved: str, gpu: int = 0) -> str:
    return (f"torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate {tried} (GPU {gpu}; {total} total capacity; "
            f"{allocated} already allocated; {free} free; {reserved} reserved in total by PyTorch)")


def new_oom(tried: str, total: str, free: str, in_use: str, allocated: str, unallocated: str, gpu: int = 0) -> str:
    return (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {tried}. GPU {gpu} has a total capacity of {total} "
            f"of which {free} is free. Including non-PyTorch memory, this process has {in_use} memory in use. Of the allocated "
            f"memory {allocated} is allocated by PyTorch, and {unallocated} is reserved by PyTorch but unallocated.")


# --- the frame that allocated names the mechanism: DDP's Reducer is plain DDP, whatever launched it --------------

REDUCER = ("  File \"/opt/venv/lib/python3.10/site-packages/torch/nn/parallel/distributed.py\", line 795, in __init__\n"
           "    self._ddp_init_helper(\n"
           "  File \"/opt/venv/lib/python3.10/site-packages/torch/nn/parallel/distributed.py\", line 1142, in _ddp_init_helper\n"
           "    self.reducer = dist.Reducer(\n")


@pytest.mark.parametrize("lead", [
    "deepspeed --num_gpus 4 train.py --model_name_or_path mistralai/Mistral-7B-v0.1 --full_finetune",
    "四张 A100 80G 全参数训练 mistral-7b，用 deepspeed 启动器拉起来的，一开始就报错：",
])
def test_ddp_reducer_frame_is_replication_whatever_launched_it(lead):
    text = lead + "\n" + REDUCER + old_oom("27.00 GiB", "79.15 GiB", "27.10 GiB", "51.20 GiB", "27.12 GiB", gpu=2)
    reply = C.diagnose(text)
    assert facts(reply)["oom.site"] == "ddp_buckets"
    assert facts(reply)["dist.strategy"] == "ddp"
    assert reply["diagnoses"][0]["id"] == "ddp_replication"
    assert ids(reply, "remedies")[0] in ("zero3", "zero2", "zero_offload")


def test_a_huge_request_of_no_model_size_on_an_adapter_run_stays_a_long_batch():
    # 40 GiB is not a whole copy of a 7B model in 16 or 32 bits: one tensor of a very long batch.
    text = ("LoRA fine-tuning of llama-2-7b on one H100, batch 1, and one sample is far longer than the rest.\n"
            + new_oom("40.00 GiB", "79.19 GiB", "20.10 GiB", "59.00 GiB", "57.20 GiB", "1.00 GiB"))
    reply = C.diagnose(text)
    assert facts(reply).get("oom.model_sized_request") is None
    assert "ddp_replication" not in ids(reply, "diagnoses")[:2]


@pytest.mark.parametrize("text", [
    "torchrun --nproc_per_node 8 train.py --model_name_or_path Qwen/Qwen2.5-7B --finetuning_type full --bf16\n"
    + old_oom("28.40 GiB", "79.15 GiB", "57.00 GiB", "20.60 GiB", "57.10 GiB", gpu=5),
    "8 卡全参微调 qwen2.5-7b，torchrun 启动：\n" + old_oom("14.20 GiB", "79.15 GiB", "43.00 GiB", "12.10 GiB", "43.10 GiB", gpu=3),
])
def test_a_request_the_size_of_the_whole_model_on_several_full_gpus_is_replication(text):
    reply = C.diagnose(text)
    assert facts(reply)["oom.model_sized_request"] is True
    assert reply["diagnoses"][0]["id"] == "ddp_replication"
    assert "padding_outliers" not in ids(reply, "diagnoses")[:1]


# --- the line that failed upcasting the model ----------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "Full continued pre-training of llama-2-7b on 4 RTX 4090s. The traceback ends at my line `model = model.float()`, CUDA out of memory.",
    "单机 4 张 4090 全量训练 qwen2.5-7b，报错在 model = model.float() 这里，显存不够",
])
def test_the_upcast_line_names_fp32_weights_and_its_fix_leads(text):
    reply = C.diagnose(text)
    assert reply["diagnoses"][0]["id"] == "fp32_weights_at_load"
    assert ids(reply, "remedies")[0] == "load_in_bf16"


def test_a_logits_upcast_is_not_the_model_upcast():
    text = ("  File \"/app/train.py\", line 88, in compute_loss\n    logits = logits.float()\n"
            + old_oom("6.00 GiB", "23.69 GiB", "17.00 GiB", "2.10 GiB", "21.00 GiB"))
    reply = C.diagnose(text)
    assert facts(reply).get("oom.site") != "fp32_upcast"
    assert reply["diagnoses"][0]["id"] != "fp32_weights_at_load"


# --- GRPO: its completions are its own memory; a reference model needs evidence --------------------------------

@pytest.mark.parametrize("text", [
    "GRPO with TRL on two H100s, num_generations 8: CUDA out of memory after a few steps.",
    "用 TRL 跑 GRPO，两张 H100，num_generations 8，跑几步就 CUDA out of memory",
])
def test_grpo_without_evidence_of_a_reference_is_its_rollouts(text):
    reply = C.diagnose(text)
    assert reply["diagnoses"][0]["id"] == "rl_rollout_memory"
    assert ids(reply, "remedies")[0] not in ("dpo_reference_memory", "use_lora")


@pytest.mark.parametrize("text", [
    "GRPO on Qwen2.5-3B with TRL on two A100 40GB, per_device_train_batch_size 8, num_generations 8: CUDA out of memory.",
    "用 TRL 跑 GRPO，qwen2.5-3b，两张 A100 40G，num_generations 8，显存不足",
])
def test_grpo_ranks_its_rollouts_above_an_unevidenced_reference(text):
    diagnoses = ids(C.diagnose(text), "diagnoses")
    assert diagnoses[0] != "rlhf_reference_model"
    assert "rl_rollout_memory" in diagnoses
    if "rlhf_reference_model" in diagnoses:
        assert diagnoses.index("rl_rollout_memory") < diagnoses.index("rlhf_reference_model")


def test_grpo_that_logs_a_kl_each_step_keeps_a_reference():
    text = ("GRPO, full fine-tuning of qwen2.5-1.5b on one 4090\n"
            "{'loss': 0.0123, 'reward': 0.41, 'kl': 0.0007, 'completion_length': 210.3, 'epoch': 0.01}\n"
            + new_oom("1.10 GiB", "23.52 GiB", "500.00 MiB", "23.01 GiB", "22.10 GiB", "450.00 MiB"))
    reply = C.diagnose(text)
    assert facts(reply)["rl.kl_logged"] is True
    assert reply["diagnoses"][0]["id"] == "rlhf_reference_model"


@pytest.mark.parametrize("text", [
    "DPO full fine-tuning of llama-3-8b on 8 A100 80GB with ZeRO-2: CUDA out of memory",
    "8 张 A100 80G 用 zero2 做 llama-3-8b 的全参 DPO，显存不足",
])
def test_dpo_of_every_weight_still_blames_its_reference_model(text):
    assert C.diagnose(text)["diagnoses"][0]["id"] == "rlhf_reference_model"


def test_a_weaker_causes_recommendation_does_not_outrank_the_likeliest_causes_first_remedy():
    text = ("GRPO with LoRA on an RTX 4090, torch.compile on (mode max-autotune), no vLLM (use_vllm false).\n"
            "  File \"/tmp/torchinductor_root/ab/cabxyz.py\", line 812, in call\n    buf3 = empty_strided_cuda((8, 4096, 151936), (622329856, 151936, 1), torch.float32)\n"
            + new_oom("18.55 GiB", "23.52 GiB", "3.10 GiB", "20.40 GiB", "19.90 GiB", "120.00 MiB"))
    reply = C.diagnose(text)
    assert reply["diagnoses"][0]["id"] == "torch_compile_autotune"
    assert ids(reply, "remedies")[0] in ("compile_off", "compile_default_mode")


# --- fragmentation needs the evidence it should ------------------------------------------------------------------

def test_a_sliver_stranded_in_a_card_full_of_live_tensors_on_a_fresh_run_is_not_first():
    # 2.1 GiB unallocated of 30.4 GiB reserved (7%), first step: the live tensors fill the card.
    text = "LoRA on llama-2-13b in 8-bit, V100 32GB, the first step fails:\n" + old_oom(
        "1.50 GiB", "31.75 GiB", "28.30 GiB", "900.00 MiB", "30.40 GiB")
    reply = C.diagnose(text)
    assert reply["diagnoses"][0]["id"] != "fragmentation"
    assert "fragmentation" in ids(reply, "diagnoses")


@pytest.mark.parametrize("text", [
    # a third of the cache stranded: defragmenting gives real room back
    new_oom("3.00 GiB", "23.65 GiB", "1.20 GiB", "22.30 GiB", "14.00 GiB", "7.60 GiB"),
    # a sliver, but after hours of steps of changing shapes
    "训练跑了好几个小时以后报错：\n" + new_oom("200.00 MiB", "79.19 GiB", "60.00 MiB", "79.10 GiB", "74.00 GiB", "4.40 GiB"),
])
def test_real_fragmentation_still_leads(text):
    assert C.diagnose(text)["diagnoses"][0]["id"] == "fragmentation"


# --- which moment failed decides what evaluation left behind --------------------------------------------------

EVAL_FRAMES = ("  File \"/usr/lib/python3/site-packages/transformers/trainer.py\", line 4121, in evaluation_loop\n"
               "    losses, logits, labels = self.prediction_step(model, inputs, prediction_loss_only, ignore_keys=ignore_keys)\n")


@pytest.mark.parametrize("lead", [
    "Two RTX 3090, LoRA on qwen2.5-14b split over both cards; training steps are fine, evaluation is not:",
    "两张 3090 上 LoRA 微调 qwen2.5-14b（模型切在两张卡上），训练正常，评估时报错：",
])
def test_a_failure_in_evaluation_is_treated_by_evaluation_remedies_not_by_the_step_estimate(lead):
    text = lead + "\n" + EVAL_FRAMES + old_oom("980.00 MiB", "23.69 GiB", "19.80 GiB", "610.00 MiB", "22.10 GiB")
    reply = C.diagnose(text)
    assert reply["diagnoses"][0]["id"] == "eval_logits_accumulation"
    assert ids(reply, "remedies")[0] in ("eval_accumulation_steps", "prediction_loss_only")


def test_the_training_step_after_an_eval_pass_is_fragmentation():
    text = ("QLoRA with FSDP on two 24 GB cards: it trains for hours without eval; with eval on, the training step right after "
            "the first evaluation fails in backward:\n  File \"/usr/lib/python3/site-packages/torch/autograd/__init__.py\", "
            "line 266, in backward\n" + new_oom("2.00 GiB", "23.67 GiB", "1.59 GiB", "22.06 GiB", "19.75 GiB", "1.78 GiB"))
    reply = C.diagnose(text)
    assert reply["diagnoses"][0]["id"] == "fragmentation"


@pytest.mark.parametrize("text", [
    "Fine-tuning with eval_steps 500: it runs out of memory right after evaluation.\n"
    + old_oom("1.00 GiB", "23.64 GiB", "18.00 GiB", "900.00 MiB", "21.00 GiB"),
])
def test_out_of_memory_as_an_eval_pass_ends_blames_the_outputs_it_kept(text):
    reply = C.diagnose(text)
    assert reply["diagnoses"][0]["id"] == "eval_logits_accumulation"


# --- a stated host symptom outranks the presumption of GPU memory ----------------------------------------------

@pytest.mark.parametrize("text", [
    "torchrun --nproc_per_node 8 finetune.py --model_name_or_path meta-llama/Llama-2-13b-hf\n"
    "Loading checkpoint shards:  33%|███▎      | 1/3\nThen the server rebooted itself, nothing else was printed.",
    "8 卡 torchrun 加载 llama-2-13b，Loading checkpoint shards 到一半，机器直接重启了",
])
def test_the_machine_going_down_is_host_memory(text):
    reply = C.diagnose(text)
    assert reply["oom_kind"] == "host"
    assert ids(reply, "diagnoses")[0] in ("every_rank_loads_full_copy", "host_oom_killer")


def test_a_user_restarting_the_machine_is_not_a_host_symptom():
    reply = C.diagnose("llama-2-7b LoRA on a 4090, batch 8: CUDA out of memory. 重启机器后还是一样。")
    assert reply["oom_kind"] == "gpu"


# --- Errno 28 beside a disk with room, or in a default container, is shared memory -------------------------------

@pytest.mark.parametrize("text", [
    "Running inside docker (docker run --gpus all -it nvcr.io/nvidia/pytorch:24.01-py3), training crashes with\n"
    "OSError: [Errno 28] No space left on device\nbut df shows the disk has plenty of room.",
    "在容器里训练（docker run --gpus all 启动的），报 OSError: [Errno 28] No space left on device，可是磁盘空间充足",
])
def test_no_space_with_a_roomy_disk_in_a_default_container_is_shared_memory(text):
    reply = C.diagnose(text)
    assert reply["oom_kind"] == "host"
    assert reply["diagnoses"][0]["id"] == "shm_too_small"
    assert ids(reply, "remedies")[0] in ("shm_size", "shm_workarounds")


@pytest.mark.parametrize("text", [
    "OSError: [Errno 28] No space left on device",
    "docker run --gpus all --shm-size 32g img python train.py\nOSError: [Errno 28] No space left on device",
    "docker run --gpus all img python train.py\n  File \"/usr/lib/python3/site-packages/transformers/trainer.py\", line 2390, in "
    "_save_checkpoint\nOSError: [Errno 28] No space left on device",
])
def test_a_real_disk_full_stays_disk_full(text):
    reply = C.diagnose(text)
    assert reply["oom_kind"] == "not_memory"
    assert reply["diagnoses"][0]["id"] == "disk_full"


# --- several processes of the job on GPU 0 -------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "torchrun with 4 ranks on 4 A6000s; nvidia-smi shows all processes on GPU 0, then CUDA out of memory on GPU 0.",
    "4 卡 torchrun 训练，nvidia-smi 里 4 个进程都在 0 号卡上，0 号卡先报 CUDA out of memory",
])
def test_ranks_piled_on_gpu0_want_each_rank_on_its_own_device(text):
    reply = C.diagnose(text)
    assert reply["diagnoses"][0]["id"] in ("uneven_ranks", "other_process_on_gpu")
    assert ids(reply, "remedies")[0] == "per_rank_device"


# --- adapters are another run for continued pre-training -------------------------------------------------------

@pytest.mark.parametrize("text", [
    "Continued pre-training of all weights of Qwen2.5-7B on 8x RTX 3090, DeepSpeed ZeRO-2, bf16, seq 2048, batch 1: CUDA out of memory",
    "8 张 3090 对 qwen2.5-7b 做增量预训练（stage pt，全参），deepspeed zero2，bf16，序列 2048，batch 1，显存不足",
])
def test_pretraining_keeps_training_every_weight(text):
    reply = C.diagnose(text)
    remedies = ids(reply, "remedies")
    assert remedies[0] not in ("use_lora", "use_qlora")
