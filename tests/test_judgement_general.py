"""Judgement proven general (issue #10): the ranking and rule principles a blind set showed missing, tried on
set-ups and wordings of our own, in English and Chinese."""
import pytest

from oomdoctor.consultation import default

C = default()

OOM_60_OF_80 = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 12.50 GiB. GPU 0 has a total capacity of "
                "79.11 GiB of which 6.20 GiB is free. Including non-PyTorch memory, this process has 72.90 GiB memory in use. "
                "Of the allocated memory 61.30 GiB is allocated by PyTorch, and 9.10 GiB is reserved by PyTorch but unallocated.")


def ids(reply, key):
    return [item["id"] for item in reply[key]]


# --- sharding over the GPUs the job already has comes before changing what is trained -------------------

@pytest.mark.parametrize("text", [
    "Full fine-tuning of Mistral-7B on 8x A100 40GB with DeepSpeed ZeRO-2, micro-batch 1, CUDA out of memory at the optimizer step.",
    "8 张 A100 40G 用 deepspeed zero2 全参微调 qwen2-7b，batch 1，优化器 step 时 OOM",
    "全参微调 llama-2-13b，8 卡 A800 80G，ddp，batch size 1，显存不够",
])
def test_on_several_gpus_the_sharding_that_fits_comes_before_lora(text):
    reply = C.diagnose(text)
    first = reply["remedies"][0]
    assert first["id"] in ("zero3", "zero2") and first["fits_after"]
    assert ids(reply, "remedies").index("use_lora") > 0


@pytest.mark.parametrize("text", [
    "Full fine-tuning of Llama-3-8B on one A100 40GB, batch 1, CUDA out of memory in the optimizer step.",
    "一张 A100 40G 全参微调 llama-3-8b，batch 1，优化器 step 时 OOM",
])
def test_on_one_gpu_there_is_nothing_to_shard_over(text):
    reply = C.diagnose(text)
    assert reply["remedies"][0]["id"] not in ("zero2", "zero3")


# --- an estimate the OOM message contradicts is no judge of what fits -----------------------------------

@pytest.mark.parametrize("text", [
    "Full fine-tuning of Qwen2.5-32B with FSDP on H100s.\n  File \"model.py\", line 80, in forward\n"
    "    logits = self.lm_head(hidden_states)\n" + OOM_60_OF_80,
    "用 FSDP 全参训练 qwen2.5-32b，H800，算 log_softmax 的时候炸了\n    logps = torch.log_softmax(logits, dim=-1)\n" + OOM_60_OF_80,
])
def test_weights_estimated_far_above_what_the_process_held_leave_the_order_to_the_diagnosis(text):
    reply = C.diagnose(text)
    # The estimate (one GPU assumed: the count is not given) puts 32B of weights above the card, yet the process
    # held 61 GiB in all when it failed on the logits: the logits' own remedy leads, not a change of method.
    assert reply["estimate"]["breakdown"]["weights"] > 79.11
    assert reply["diagnoses"][0]["id"] == "logits_large_vocab"
    assert reply["remedies"][0]["id"] in ("chunked_loss", "reduce_batch_size", "liger_fused_loss")


# --- host RAM: what fits on the GPU is no guide, and an offload nobody configured is not blamed ------------

@pytest.mark.parametrize("text", [
    "8 x A100 80GB, 128 GB of system RAM. Full fine-tuning of Llama-2-13B, the job gets killed by the OOM killer, "
    "dmesg: Out of memory: Killed process 4242 (python)",
    "8 张 A800，机器内存 256G，全参训练 qwen2-14b，内存 OOM 了，进程被 kill",
])
def test_a_host_oom_without_offload_is_the_ranks_copies_and_gpu_remedies_do_not_lead(text):
    reply = C.diagnose(text)
    assert reply["oom_kind"] == "host"
    assert "zero_offload_host_ram" not in ids(reply, "diagnoses")
    assert reply["diagnoses"][0]["id"] == "every_rank_loads_full_copy"
    assert reply["remedies"][0]["id"] not in ("more_gpus", "bigger_gpu", "zero3", "reduce_offload")


@pytest.mark.parametrize("text", [
    "I train a model per fold in a for loop (cross-validation) with DeepSpeed; the second fold's process gets killed "
    "by the OOM killer while the model is loading.",
    "超参搜索，在循环里训练多个模型，第二个模型加载的时候进程被 OOM killer 杀掉了，主机内存不足",
])
def test_a_host_oom_in_repeated_runs_is_what_the_last_run_left(text):
    reply = C.diagnose(text)
    assert reply["oom_kind"] == "host"
    assert reply["diagnoses"][0]["id"] == "notebook_stale_models"
    assert reply["remedies"][0]["id"] == "release_between_runs"


# --- RL: a failure in the generation is the rollouts' ----------------------------------------------------

@pytest.mark.parametrize("text", [
    "GRPO with OpenRLHF and a colocated vLLM: CUDA out of memory as soon as vLLM starts.",
    "PPO training, vLLM colocated with the actor: out of memory when vLLM wakes up after the first update.",
    "GRPO 训练，vllm 和训练共用 GPU，vllm 唤醒时显存不够",
    "用 verl 训 GRPO，rollout 阶段 CUDA out of memory",
    "GRPO run:\nValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
    "GRPO with TRL\n(LLMRayActor pid=1234) CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62",
])
def test_an_rl_failure_in_the_generation_is_the_rollouts(text):
    reply = C.diagnose(text)
    facts = {f["name"]: f["value"] for f in reply["facts"]}
    assert facts["phase"] == "generate"
    assert reply["diagnoses"][0]["id"] == "rl_rollout_memory"
    assert "generate_during_eval" not in ids(reply, "diagnoses")


@pytest.mark.parametrize("text", [
    "The KV cache is sized when the engine starts; SFT of Llama-3-8B ran out of memory in the backward pass.",
    "SFT 训练，在反向传播时显存不够",
    "while generating the dataset with a script, then SFT runs out of memory in the optimizer step",
])
def test_training_failures_are_not_read_as_generation(text):
    facts = {f["name"]: f["value"] for f in C.diagnose(text)["facts"]}
    assert facts.get("phase") != "generate"


@pytest.mark.parametrize("text", [
    "GRPO with TRL, vllm_gpu_memory_utilization 0.8, CUDA out of memory.",
    "GRPO 训练 qwen2.5-7b，vllm gpu_memory_utilization 设成 0.6，显存爆了",
])
def test_a_vllm_setting_says_vllm_generates_so_generate_batches_and_beta_are_not_pressed(text):
    remedies = ids(C.diagnose(text), "remedies")
    # generate() in the trainer is not what generates here, and beta 0 only helps where the method is known to be full.
    assert not remedies or remedies[0] not in ("rl_one_generation_step", "rl_beta_zero")


# --- a report with no cause still says what it read and what it needs ------------------------------------

@pytest.mark.parametrize("text, lang, read, need", [
    ("my training crashed", "en", "no error message", "the error itself"),
    ("训练挂了", "zh", "没有找到报错信息", "报错本身"),
    ("It dies somewhere, on 8 x A100", "en", "number of GPUs the job trains on: 8", "the error itself"),
    ("8 张 A100，跑着跑着就没了", "zh", "8", "报错本身"),
])
def test_a_report_without_a_cause_says_what_it_read_and_what_it_needs(text, lang, read, need):
    reply = C.diagnose(text, lang=lang)
    assert not reply["diagnoses"]
    notices = " ".join(reply["notices"])
    assert read.lower() in notices.lower() and need in notices
    assert need in reply["text"]


def test_a_report_with_a_cause_carries_no_such_notice():
    reply = C.diagnose("Llama-3-8B LoRA on a 4090, CUDA out of memory in the backward pass")
    assert reply["diagnoses"] and not any("To name a cause" in n for n in reply["notices"])


# --- a failure while the data is prepared, with no message, is host RAM -----------------------------------

@pytest.mark.parametrize("text", [
    "用 LLaMA-Factory 训练，在 Running tokenizer on dataset 阶段跑到一半进程就没了",
    "The run dies during the tokenization stage, before any training step; no traceback.",
    "预处理数据的时候挂了，什么报错都没有",
])
def test_a_silent_failure_while_preparing_data_is_host_ram(text):
    reply = C.diagnose(text)
    assert reply["oom_kind"] == "host"
    assert reply["diagnoses"][0]["id"] == "tokenize_in_memory"


# --- weights that fill most of the card leave the step no room ----------------------------------------------

@pytest.mark.parametrize("text", [
    "LoRA of Llama-2-13B on one V100 32GB, batch size 1, CUDA out of memory on the first step.",
    "在一张 4080 上 LoRA 微调 qwen2-7b，batch 1，爆显存",
    "DPO with LoRA of Yi-34B on 8 x A100 80GB, batch 1: out of memory",
])
def test_weights_that_fill_three_quarters_of_the_card_are_the_cause(text):
    reply = C.diagnose(text)
    share = {f["name"]: f["value"] for f in reply["facts"]}["estimate.weights_share"]
    assert 0.75 <= share < 1
    assert reply["diagnoses"][0]["id"] == "model_too_large_for_gpu"


def test_weights_with_room_to_spare_are_not():
    reply = C.diagnose("LoRA of Llama-3-8B on a 4090, batch 1, CUDA out of memory")
    assert "model_too_large_for_gpu" not in ids(reply, "diagnoses")



# --- an FSDP all-gather names the wrap policy only when the unit is wider than a layer ----------------------

GATHER = ("  File \"torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py\", line 250, in foreach_all_gather\n"
          "    all_gather_output = all_gather_comm.allocate((all_gather_input_numel * world_size,), dtype=dtype, device=device)\n"
          "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {tried} GiB. GPU 3 has a total capacity of 79.11 GiB "
          "of which 0.90 GiB is free. Including non-PyTorch memory, this process has 78.20 GiB memory in use. Of the allocated "
          "memory 75.10 GiB is allocated by PyTorch, and 1.60 GiB is reserved by PyTorch but unallocated.")


@pytest.mark.parametrize("text", [
    "SFT of Llama-3.1-70B with FSDP on 16 x H100 80GB, sequences of 8192 tokens, micro-batch 2.\n" + GATHER.format(tried="1.60"),
    "用 FSDP 在 32 张 H100 上全参训练 llama-3.3-70b，序列长度 8192，batch 2，反向传播时爆显存\n" + GATHER.format(tried="1.96"),
])
def test_a_gather_of_one_layer_is_where_it_failed_not_why(text):
    reply = C.diagnose(text)
    assert reply["diagnoses"][0]["id"] == "activations_too_large"
    assert "fsdp_wrap_policy" not in ids(reply, "diagnoses")


@pytest.mark.parametrize("text", [
    "Full fine-tuning of Llama-2-13B with FSDP on 8 x A100 80GB, no auto wrap policy set.\n" + GATHER.format(tried="24.20"),
    "8 张 A100 80G 上用 FSDP 全参训练 qwen2.5-14b\n" + GATHER.format(tried="27.50"),
])
def test_a_gather_of_many_layers_is_a_unit_too_wide(text):
    reply = C.diagnose(text)
    assert reply["diagnoses"][0]["id"] == "fsdp_wrap_policy"
    assert reply["remedies"][0]["id"] == "fsdp_auto_wrap"


def test_a_large_gather_of_an_unknown_model_is_no_evidence_of_the_unit():
    reply = C.diagnose("training with accelerate\n" + GATHER.format(tried="6.00"))
    fired = {line for d in reply["diagnoses"] if d["id"] == "fsdp_wrap_policy" for line in d["why"]}
    assert not any("decoder layers" in line for line in fired)


# --- memory that grows: measure what grows before blaming the user's code --------------------------------

@pytest.mark.parametrize("text", [
    "Full fine-tuning of Qwen2-7B with the HF Trainer on 8 x A800, GPU memory keeps growing every step and after 2000 steps it is out of memory.",
    "用 LLaMA-Factory 全参训练 qwen2-7b，显存随着训练逐渐升高，跑了两千步以后 OOM",
])
def test_growing_memory_is_first_measured(text):
    reply = C.diagnose(text)
    assert reply["diagnoses"][0]["id"] in ("memory_leak", "padding_outliers", "fragmentation")
    assert reply["remedies"][0]["id"] == "memory_snapshot" or reply["diagnoses"][0]["id"] != "memory_leak"
    assert ids(reply, "remedies").index("memory_snapshot") < ids(reply, "remedies").index("detach_tracked_tensors")


@pytest.mark.parametrize("text", [
    "(LLMRayActor pid=4242) CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62",
    "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
    "  File \"vllm/v1/engine/core.py\", line 80, in __init__\n    self._initialize_kv_caches(vllm_config)\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
])
def test_the_rollout_engines_own_failure_is_the_rollouts_whatever_the_objective_is_called(text):
    reply = C.diagnose(text)
    assert reply["diagnoses"][0]["id"] == "rl_rollout_memory"
    assert "generate_during_eval" not in ids(reply, "diagnoses")


def test_vllms_sleep_allocator_says_sleep_mode_is_on_so_it_is_not_offered():
    reply = C.diagnose("(LLMRayActor pid=4242) CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62")
    assert {f["name"]: f["value"] for f in reply["facts"]}["rl.vllm_sleep"] is True
    assert "vllm_sleep_mode" not in ids(reply, "remedies")


# --- a consultation whose first paste says nothing of what ran out asks that first -----------------------

@pytest.mark.parametrize("text", [
    "PID     MEM(GB) COMMAND\n40126   11.20   ray::WorkerDict.actor_rollout_generate_sequences\n39907   0.54    ray::main_task",
    "it just dies, no message",
    "进程自己就没了，没有任何输出",
])
def test_a_paste_that_does_not_say_what_ran_out_gets_that_question(text):
    from oomdoctor.consultation import State
    _, reply = C.take_turn(State(), text)
    assert reply["status"] == "question" and reply["questions"][0]["fact"] == "log.stated_memory"


def test_a_paste_that_says_it_asks_something_else():
    from oomdoctor.consultation import State
    _, reply = C.take_turn(State(), "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
    assert not reply["questions"] or reply["questions"][0]["fact"] != "log.stated_memory"


# --- eager attention makes big tensors of its own; an estimate far below what was held judges no saving ----

BIG_78 = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a total capacity of 79.11 GiB "
          "of which 1.40 GiB is free. Including non-PyTorch memory, this process has 77.60 GiB memory in use. Of the "
          "allocated memory 75.00 GiB is allocated by PyTorch, and 1.20 GiB is reserved by PyTorch but unallocated.")


@pytest.mark.parametrize("text", [
    "LoRA of Qwen2-VL-7B-Instruct with gradient checkpointing, batch 1, max_length 1024, on one A100 80GB.\n"
    "model = Qwen2VLForConditionalGeneration.from_pretrained(path, attn_implementation=\"eager\")\n" + BIG_78,
    "Qwen2-VL-7B 做 LoRA，开了梯度检查点，batch 1，max_length 1024，单卡 A100 80G\nattn_implementation: eager\n" + BIG_78,
])
def test_eager_attention_with_a_big_tensor_leads_with_attention_not_logits(text):
    reply = C.diagnose(text)
    assert reply["diagnoses"][0]["id"] == "eager_attention_long_seq"
    # The estimate (1024 tokens, images unsized) is a quarter of what the process held: it does not veto the
    # attention kernel's remedy.
    assert reply["remedies"][0]["id"] == "memory_efficient_attention"


# --- what the toolkit already does is not the first remedy ----------------------------------------------

@pytest.mark.parametrize("text", [
    "I fine-tune Llama-3-8B with LoRA using LLaMA-Factory on one RTX 4090, cutoff_len 4096, batch 2, and it runs out of CUDA memory.",
    "Training Qwen2-7B with ms-swift, LoRA, 1x A10 24GB, max_length 8192, CUDA out of memory",
    "用 ms-swift 对 qwen2.5-vl-7b 做 LoRA 微调，两张 24G 的卡，max_length 2048，batch 2，显存不足",
    "用 LLaMA-Factory 对 qwen2.5-7b 做 LoRA 微调，一张 4090，序列长度 4096，batch 4，显存不足",
])
def test_checkpointing_the_toolkit_turns_on_is_not_offered_first(text):
    reply = C.diagnose(text)
    remedies = ids(reply, "remedies")
    assert remedies and remedies[0] != "gradient_checkpointing"
    if "gradient_checkpointing" in remedies:
        assert remedies[-1] == "gradient_checkpointing"


@pytest.mark.parametrize("text", [
    "I fine-tune Llama-3-8B with LoRA on one RTX 4090, cutoff_len 4096, batch 2, and it runs out of CUDA memory.",
    "对 qwen2.5-vl-7b 做 LoRA 微调，两张 24G 的卡，max_length 2048，batch 2，显存不足",
])
def test_without_a_toolkit_checkpointing_off_is_assumed_and_offered_first(text):
    assert ids(C.diagnose(text), "remedies")[0] == "gradient_checkpointing"


# --- the rollout engine's own allocation failed: its share of the card leads ----------------------------

VLLM_INIT = ("  File \"/usr/lib/python3/site-packages/vllm/v1/engine/core.py\", line 83, in __init__\n"
             "    self._initialize_kv_caches(vllm_config)\n"
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of "
             "79.19 GiB of which 900.00 MiB is free. Including non-PyTorch memory, this process has 78.20 GiB memory in use. "
             "Of the allocated memory 75.10 GiB is allocated by PyTorch, and 1.20 GiB is reserved by PyTorch but unallocated.")


@pytest.mark.parametrize("text", [
    "GRPO on Llama-3.1-8B, trl, --use_vllm true, 4 GPUs.\n" + VLLM_INIT,
    "RLOO with vLLM generation on qwen2.5-7b, launched with accelerate\n" + VLLM_INIT,
    "用 TRL 训练 GRPO，开了 use_vllm，模型 qwen2.5-14b，8 张 H100\n" + VLLM_INIT,
])
def test_a_rollout_engine_failing_at_start_up_is_treated_by_its_share(text):
    reply = C.diagnose(text)
    assert reply["diagnoses"][0]["id"] == "rl_rollout_memory"
    remedies = ids(reply, "remedies")
    assert remedies[0] in ("vllm_lower_share", "vllm_server_mode")
    # generate() in the trainer is not what failed
    assert remedies.index("vllm_lower_share") < remedies.index("rl_one_generation_step") if "rl_one_generation_step" in remedies else True


# --- a GPU estimate beside a failure that is not GPU memory ---------------------------------------------

BUS_ERROR = ("RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible that "
             "dataloader's workers are out of shared memory. Please try to raise your shared memory limit.")


@pytest.mark.parametrize("text", [
    "Training llama-3-8b, then the loader died:\n" + BUS_ERROR,
    "微调 qwen2.5-7b 的时候数据加载报错\n" + BUS_ERROR,
    "RuntimeError: CUDA error: an illegal memory access was encountered while fine-tuning qwen2.5-14b",
])
def test_no_gpu_estimate_on_guesses_when_gpu_memory_is_not_what_failed(text):
    reply = C.diagnose(text)
    assert reply["oom_kind"] in ("host", "not_memory")
    assert reply["estimate"] is None


@pytest.mark.parametrize("text, words", [
    ("LoRA on llama-3-8b, one A100 40GB, batch 4.\n" + BUS_ERROR, "not the cause"),
    ("一张 A100 40G 上用 LoRA 微调 llama-3-8b，batch 4\n" + BUS_ERROR, "并不是原因"),
    ("qwen2-7b 全参微调，deepspeed，8 卡，加载模型的时候进程被 OOM killer 杀掉了\nLoading checkpoint shards:  50%|█████     | 2/4\nKilled",
     "并不是原因"),
])
def test_a_stated_set_up_keeps_its_estimate_marked_as_not_the_cause(text, words):
    reply = C.diagnose(text)
    assert reply["oom_kind"] == "host"
    assert reply["estimate"] is not None and words in reply["estimate"]["remarks"][0]
    assert words in reply["text"]


def test_a_gpu_failure_keeps_its_estimate_without_that_remark():
    reply = C.diagnose("LoRA on llama-3-8b, one RTX 4090, seq 8192, batch 4, CUDA out of memory")
    assert reply["oom_kind"] == "gpu" and reply["estimate"] is not None
    assert not any("not the cause" in r for r in reply["estimate"]["remarks"])


# --- full fine-tuning under DeepSpeed on several GPUs: offload in their own config before another method ----

@pytest.mark.parametrize("text", [
    "Full fine-tuning of a 30B model (Qwen2.5-32B) on 8x A100 80GB with DeepSpeed ZeRO-2, batch 1, seq 2048: CUDA out of memory",
    "8 张 A800 80G，deepspeed zero2 全参微调 qwen2.5-32b，batch 1，序列长度 2048，显存不足",
])
def test_offload_that_keeps_full_fine_tuning_comes_before_adapters(text):
    reply = C.diagnose(text)
    remedies = ids(reply, "remedies")
    assert reply["remedies"][0]["fits_after"]
    assert remedies[0] in ("zero3", "zero_offload")
    for other in ("use_lora", "use_qlora"):
        if other in remedies:
            assert remedies.index(other) > 0


@pytest.mark.parametrize("text", [
    "PPO with OpenRLHF, vLLM colocated with training on the same GPUs, llama-3-8b, 32 A100s: CUDA out of memory",
    "用 OpenRLHF 跑 PPO，vllm 和训练共用 GPU（colocate），llama-3-8b，4 台 8 卡 A100，显存不足",
])
def test_a_colocated_engine_the_estimate_does_not_size_is_treated_by_its_share_first(text):
    reply = C.diagnose(text)
    # The estimate holds no rollouts (no completion length), so it cannot say the engine's share saves nothing.
    assert reply["estimate"] is None or not reply["estimate"]["breakdown"]["rollouts"]
    assert ids(reply, "remedies")[0] == "vllm_lower_share"


# --- a cache that holds many times the failed request is fragmented, whatever its share of the card -----

@pytest.mark.parametrize("tried, reserved", [("96.00 MiB", "2.40 GiB"), ("300.00 MiB", "5.10 GiB"), ("1.00 GiB", "6.50 GiB")])
@pytest.mark.parametrize("lead", ["Training for hours, then:", "训练跑了几个小时以后报错："])
def test_reserved_unallocated_many_times_the_request_is_fragmentation(tried, reserved, lead):
    text = (f"{lead}\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate {tried}. GPU 0 has a total capacity "
            f"of 79.19 GiB of which 50.00 MiB is free. Including non-PyTorch memory, this process has 79.10 GiB memory "
            f"in use. Of the allocated memory 72.00 GiB is allocated by PyTorch, and {reserved} is reserved by PyTorch "
            f"but unallocated.")
    assert "fragmentation" in ids(C.diagnose(text), "diagnoses")[:2]


def test_reserved_unallocated_below_a_few_requests_is_not_called_fragmentation_by_that_rule():
    text = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB "
            "of which 50.00 MiB is free. Including non-PyTorch memory, this process has 79.10 GiB memory in use. Of the "
            "allocated memory 75.90 GiB is allocated by PyTorch, and 1.50 GiB is reserved by PyTorch but unallocated.")
    assert ids(C.diagnose(text), "diagnoses")[0] != "fragmentation"


# --- a host OOM while loading is not treated by switching off an offload nobody configured -----------------

@pytest.mark.parametrize("text", [
    "全参微调 qwen2.5-14b，单卡 A100 80G，机器内存 32G，加载模型的时候被 OOM killer 杀了\n"
    "Loading checkpoint shards:  25%|██▌       | 2/8\nKilled",
    "Full fine-tuning of mistral-7b on one A100 80GB, 32 GB of RAM.\nLoading checkpoint shards:  50%|█████     | 1/2\nKilled",
])
def test_no_offload_remedy_where_no_offload_is_configured(text):
    reply = C.diagnose(text)
    assert reply["oom_kind"] == "host"
    remedies = ids(reply, "remedies")
    assert remedies[0] in ("add_host_ram", "low_cpu_mem_loading", "load_in_bf16")
    assert "reduce_offload" not in remedies


def test_an_offload_the_diagnosis_suspects_keeps_its_remedy():
    reply = C.diagnose("Full fine-tuning llama-2-13b with deepspeed zero3, 8x A100, 256 GB RAM, "
                       "killed by the OOM killer at the first step")
    assert "zero_offload_host_ram" in ids(reply, "diagnoses")
    assert "reduce_offload" in ids(reply, "remedies")
