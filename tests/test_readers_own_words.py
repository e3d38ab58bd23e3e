"""Families of wording a held-out set showed unread (blind set 3), each tried on wordings of our own in
English and Chinese, with the near misses that must stay unread. None of these is the blind case's text."""
import pytest

from oomdoctor import knowledge
from oomdoctor.extractors import Unknown, gpu_count, host_oom
from oomdoctor.observation import observe

KB = knowledge.default()


def observed(text):
    return {o.name: o.value for o in observe(text, KB)}


def count(text):
    return {f.name: f.value for f in gpu_count.extract(text) if not isinstance(f.value, Unknown)}.get("dist.num_gpus")


# --- a count of cards: the plural of a card's name, per-machine counts said with 各, Chinese numerals ---------

@pytest.mark.parametrize("text, n", [
    ("We train on 8 H100s.", 8),
    ("I have 4 RTX 3090s and it fails", 4),
    ("the box has 2 A6000s", 2),
    ("renting 4 T4s on a cloud", 4),
    ("Fine-tuning with 8 L40Ss, bf16", 8),
    ("across 16 A100s.", 16),
    ("两台机器各 8 张卡", 16),
    ("3 台服务器各 4 张 A100", 12),
    ("十六张卡", 16),
])
def test_counts_of_cards_in_words(text, n):
    assert count(text) == n


@pytest.mark.parametrize("text", [
    "the model has 8 A100 tuned layers",   # no plural, no placing word: not a count
    "ran 3 V100 jobs last week",
    "10 CPUs and 256 GB RAM",
    "十二张卡",                              # 12, never the 2 it ends with
    "三十二张 A100",
    "随机各 8 卡",                           # 随机 (random) counts no machines: unknown, not 8
])
def test_numbers_that_are_no_card_count_stay_unread(text):
    assert count(text) is None


# --- host RAM in plain prose ----------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "训练脚本一跑，内存一下就满了",
    "CPU 内存就被吃满了",
    "内存又撑爆了",
    "内存瞬间耗尽",
    "还没开始训练，内存占到 500 多 G",
    "内存已经占了 300G",
])
def test_host_ram_in_chinese_prose(text):
    assert observed(text).get("log.stated_memory") == "host"


@pytest.mark.parametrize("text", [
    "显卡内存直接爆了",      # the card's memory
    "每张卡内存占了 70G",
    "内存直接够用",
])
def test_card_memory_or_no_failure_is_not_host_ram(text):
    assert observed(text).get("log.stated_memory") != "host"


@pytest.mark.parametrize("text", [
    "the worker was killed by signal 9",
    "it terminated with SIGKILL",
    "the launcher reports error code -9",
])
def test_a_kill_by_signal_in_words(text):
    assert {f.name: f.value for f in host_oom.extract(text)}.get("process.exit_code") == -9


def test_a_signal_number_that_is_not_nine_is_not_a_kill():
    assert "process.exit_code" not in {f.name for f in host_oom.extract("killed by signal 9.5 seconds later")}


# --- phases said in words --------------------------------------------------------------------------------

@pytest.mark.parametrize("text, phase", [
    # loading: before the weights reach the card, the moment loading ends, loading on the CPU as host RAM fills
    ("权重还没加载到显卡，机器就卡死了", "loading"),
    ("参数还没搬到 GPU 上进程就没了", "loading"),
    ("The process dies before the model is even moved to the GPU", "loading"),
    ("just after loading the weights it gets killed", "loading"),
    ("right after the model has been loaded, the kernel kills it", "loading"),
    ("I load the model on the CPU first and the RAM fills up", "loading"),
    ("用 CPU 加载权重，然后内存就爆了", "loading"),
    # the optimizer's update
    ("参数更新的时候 OOM", "optimizer"),
    ("optimizer.step() 的时候爆了", "optimizer"),
    ("一到更新权重这一步就挂", "optimizer"),
    ("OOM at the weight update", "optimizer"),
    ("it crashes when the optimizer steps", "optimizer"),
    # evaluation
    ("进入验证就爆显存", "evaluation"),
    ("一跑评估就挂", "evaluation"),
    ("刚进评估显存就满了", "evaluation"),
    ("as soon as evaluation starts it runs out of memory", "evaluation"),
    ("once validation kicks in, CUDA OOM", "evaluation"),
    ("the moment eval begins it dies", "evaluation"),
])
def test_phases_in_words(text, phase):
    assert observed(text).get("phase") == phase


@pytest.mark.parametrize("text", [
    "after the model is loaded, training runs for 200 steps then OOM",   # loading is long over
    "I load the model on the CPU first",                                  # nothing failed there
    "the optimizer is AdamW",
    "开始评估前先保存一下",
])
def test_phases_not_stated_stay_unread(text):
    assert observed(text).get("phase") not in ("loading", "optimizer", "evaluation")


# --- training had run before the failure: a whole epoch done --------------------------------------------

@pytest.mark.parametrize("text", [
    "the first epoch ran fine, then OOM",
    "OOM after the first epoch",
    "it dies once the second epoch begins",
    "at the start of the 2nd epoch the workers crash",
    "第一个 epoch 跑完就挂了",
    "第一轮训练完之后 OOM",
    "1个epoch之后显存爆了",
])
def test_an_epoch_done_before_the_failure(text):
    assert observed(text).get("log.after_steps") is True


@pytest.mark.parametrize("text", [
    "the first epoch OOMs",
    "第一个 epoch 就 OOM",
    "runs out of memory in the first epoch",
])
def test_a_failure_within_the_first_epoch_says_nothing_about_steps(text):
    assert observed(text).get("log.after_steps") is not True


# --- a setting's key, a verb of change, and its value ------------------------------------------------------

@pytest.mark.parametrize("text, length", [
    ("cutoff_len 设成 10000", 10000),
    ("max_length 改成 8192", 8192),
    ("序列长度拉到 32k", 32768),
    ("上下文拉到 16k 就爆", 16384),
    ("max_seq_length 调到 4096", 4096),
    ("seq len 改成 2048", 2048),
    ("max_seq_length was raised to 4096", 4096),
    ("max_length 设为 4k", 4096),
    ("cutoff_len 从 8192 降到 6144", 6144),
])
def test_sequence_length_with_a_verb(text, length):
    assert observed(text).get("train.seq_len") == length


@pytest.mark.parametrize("text", [
    "max_new_tokens 设成 512",       # generation, not the training length
    "max_source_length 设成 512",    # only the prompt's part
    "max_target_length 改成 256",
    "max_prompt_length 设为 1024",
])
def test_partial_or_generation_lengths_are_not_the_sequence_length(text):
    assert observed(text).get("train.seq_len") is None


@pytest.mark.parametrize("text, batch", [
    ("batch 设 1", 1),
    ("batch size 调小到 2 还是爆", 2),
    ("bs 降到 1", 1),
    ("批大小改到 8", 8),
    ("the micro bs was set to 2", 2),
])
def test_batch_size_with_a_verb(text, batch):
    assert observed(text).get("train.batch_size") == batch


def test_an_evaluation_batch_with_a_verb_is_not_the_training_batch():
    assert observed("eval batch 设 16").get("train.batch_size") is None


# --- objectives named in words ------------------------------------------------------------------------------

@pytest.mark.parametrize("text, objective", [
    ("continued pre-training of Llama 3 on our papers", "pretrain"),
    ("continual pretraining on domain data", "pretrain"),
    ("pre-training from scratch, 1B model", "pretrain"),
    ("增量预训练 Qwen2.5-7B", "pretrain"),
    ("在做预训练，数据 50G", "pretrain"),
    ("training a reward model on preference pairs", "reward"),
    ("训练奖励模型的时候 OOM", "reward"),
    ("做 RM 训练", "reward"),
    ("RLOO with 4 generations", "rloo"),
])
def test_objectives_in_words(text, objective):
    assert observed(text).get("train.objective") == objective


@pytest.mark.parametrize("text", [
    "用预训练模型做 LoRA 微调",                     # a pre-trained model is not a pre-training job
    "load the pre-trained model and train LoRA",
    "预训练的权重是 bf16",
])
def test_a_pretrained_model_is_not_pretraining(text):
    assert observed(text).get("train.objective") != "pretrain"


def test_a_reward_model_a_ppo_run_uses_leaves_the_objective_ppo():
    assert observed("PPO with a reward model from the hub").get("train.objective") == "ppo"


# --- a PyTorch message wrapped at a blank: the blank became a line break ---------------------------------

_OLD_WORDING = ("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 23.69 GiB total capacity; 22.87 GiB already "
                "allocated; 3.06 MiB free; 23.25 GiB reserved in total by PyTorch)")
_NEW_WORDING = ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.2 GiB "
                "is free. Including non-PyTorch memory, this process has 77.9 GiB memory in use. Of the allocated memory "
                "70.1 GiB is allocated by PyTorch, and 6.5 GiB is reserved by PyTorch but unallocated.")


def _cuda(text):
    from oomdoctor.extractors import cuda_oom
    return {f.name: f.value for f in cuda_oom.extract(text)}


@pytest.mark.parametrize("phrase", ["reserved in total", "total capacity", "already allocated"])
def test_old_wording_wrapped_at_a_blank(phrase):
    wrapped = _OLD_WORDING.replace(phrase, phrase.replace(" ", "\n", 1))
    assert _cuda(wrapped) == _cuda(_OLD_WORDING)
    assert _cuda(wrapped)["oom.reserved_gib"] == 23.25


@pytest.mark.parametrize("phrase", ["out of memory", "has a total capacity", "memory in use", "allocated by PyTorch",
                                    "but unallocated"])
def test_new_wording_wrapped_at_a_blank(phrase):
    wrapped = _NEW_WORDING.replace(phrase, phrase.replace(" ", "\n", 1))
    assert _cuda(wrapped) == _cuda(_NEW_WORDING)


# --- settings said in words that a config states as keys --------------------------------------------------

@pytest.mark.parametrize("text, fact, value", [
    ("梯度累积设成 8", "train.grad_accum", 8),
    ("gradient accumulation steps of 16", "train.grad_accum", 16),
    ("grad accum 4, bf16", "train.grad_accum", 4),
    ("梯度累加步数为 32", "train.grad_accum", 32),
    ("grad_accum was set to 2", "train.grad_accum", 2),
    ("lora rank 设成 64", "lora.rank", 64),
    ("LoRA 秩 16", "lora.rank", 16),
    ("rank 128 的 LoRA", "lora.rank", 128),
    ("a LoRA of rank 64", "lora.rank", 64),
    ("rank-16 LoRA on q and v", "lora.rank", 16),
    ("optimizer is adafactor", "train.optimizer", "adafactor"),
    ("用的 Lion 优化器", "train.optimizer", "lion"),
    ("Adafactor optimizer, bs 1", "train.optimizer", "adafactor"),
    ("paged_adamw_32bit", "train.optimizer", "paged_adamw_32bit"),
    ("8-bit Lion", "train.optimizer", "lion_8bit"),
    ("num_workers 设成 8", "data.num_workers", 8),
    ("num_workers is 4", "data.num_workers", 4),
    ("ZeRO-3 with CPU offload", "dist.offload_optimizer", "cpu"),
    ("开了 CPU offload", "dist.offload_optimizer", "cpu"),
    ("优化器 offload 到 CPU", "dist.offload_optimizer", "cpu"),
    ("CPU offload is on", "dist.offload_optimizer", "cpu"),
])
def test_settings_in_words(text, fact, value):
    assert observed(text).get(fact) == value


@pytest.mark.parametrize("text, fact", [
    ("[rank 3] lora module loaded", "lora.rank"),       # a process's rank
    ("rank 0 uses lora", "lora.rank"),
    ("should I try adafactor?", "train.optimizer"),      # advice asked for, not what runs
    ("cpu_offload: false", "dist.offload_optimizer"),    # a key set off
    ("I read about CPU offload", "dist.offload_optimizer"),
])
def test_settings_not_stated_stay_unread(text, fact):
    assert observed(text).get(fact) in (None, "none")


@pytest.mark.parametrize("text, fact, value", [
    ("内存只有 32 个 G", "host.ram_total_gib", 32.0),
    ("显存 24G", "gpu.memory_gib", 24.0),
    ("VRAM: 24GB", "gpu.memory_gib", 24.0),
    ("显存是 48G 的卡", "gpu.memory_gib", 48.0),
    ("存模型的时候挂了", "phase", "saving"),
    ("save checkpoint 的时候爆了", "phase", "saving"),
    ("evaluation 的时候爆了", "phase", "evaluation"),
    ("validation 阶段 OOM", "phase", "evaluation"),
    ("OOM during backward", "phase", "backward"),
])
def test_sizes_and_phases_in_mixed_wording(text, fact, value):
    assert observed(text).get(fact) == value


@pytest.mark.parametrize("text, fact", [
    ("显存 70G 左右就爆了", "gpu.memory_gib"),     # an amount in use, not the card
    ("显存 20G 就爆了", "gpu.memory_gib"),
    ("内存占用 12 个 G", "host.ram_total_gib"),
    ("kept at backward compatibility level 2", "phase"),
])
def test_amounts_in_use_are_not_capacities(text, fact):
    assert observed(text).get(fact) is None


# --- images in vision-language training ---------------------------------------------------------------------

@pytest.mark.parametrize("text, side", [
    ("图片分辨率 1024", 1024),
    ("image size 448", 448),
    ("448x448 images", 448),
    ("分辨率 1344×1344", 1344),
    ("image size 设成 896", 896),
    ("输入图片尺寸为 336", 336),
])
def test_image_side_in_words(text, side):
    assert observed(text).get("train.image_size") == side


@pytest.mark.parametrize("text", [
    "images resized to 1024x768 pixels",   # not square: no one side
    "1024x768 的图片",
    "分辨率 1920x1080 的视频",
    "2 x 4096 matrix",
    "max image tokens 1024",
    '"image_size": 384',                    # a vision tower's config key, not what the user says of the data
])
def test_image_side_not_stated_stays_unread(text):
    assert observed(text).get("train.image_size") is None


@pytest.mark.parametrize("text, n", [
    ("每条样本 4 张图", 4),
    ("每个样本有两张图片", 2),
    ("4 images per sample", 4),
    ("each example has up to 8 images", 8),
    ("10 images per sample, 336px", 10),
])
def test_images_per_sample_in_words(text, n):
    assert observed(text).get("train.images_per_sample") == n


@pytest.mark.parametrize("text", ["4 images in the dataset folder", "数据集有 4 张图", "8 images/s throughput"])
def test_image_counts_that_are_not_per_sample_stay_unread(text):
    assert observed(text).get("train.images_per_sample") is None


def test_a_prefix_length_is_not_the_sequence_length():
    # ChatGLM's pre_seq_len is the P-tuning prefix; max_seq_len after it is the training length.
    assert observed("pre_seq_len 改成 16、batch 2、max_seq_len 512").get("train.seq_len") == 512
    assert observed("pre_seq_len 设成 128").get("train.seq_len") is None


@pytest.mark.parametrize("text, n", [
    ("双机各8卡", 16),
    ("两机各 8 张 A100", 16),
    ("我们双机各8卡", 16),                      # a numeral right after a Chinese word still counts the machines
    ("我们用两台机器，每台 8 张 A100", 16),
    ("四机32卡", 32),
])
def test_machines_said_with_ji(text, n):
    assert count(text) == n


@pytest.mark.parametrize("text", ["随机各8卡", "第二台机器各 8 张卡"])
def test_words_that_do_not_count_machines(text):
    assert count(text) is None
