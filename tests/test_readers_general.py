"""Readers proven general: each class of wording a blind set showed unread, tried on wordings of our own
(English and Chinese), with the near misses that must stay unread. A wrong fact is worse than a missing one."""
import pytest

from oomdoctor import knowledge
from oomdoctor.extractors import Unknown, gpu_count
from oomdoctor.observation import observe

KB = knowledge.default()


def facts(extractor, text):
    return {f.name: f.value for f in extractor.extract(text) if not isinstance(f.value, Unknown)}


def observed(text):
    return {o.name: o.value for o in observe(text, KB)}


# --- a launcher whose count the paste leaves open says nothing against a count in words ------------------

@pytest.mark.parametrize("text, count", [
    ("torchrun --nproc_per_node auto train.py\nrunning on 8x A100 80GB", 8),
    ("torchrun --nproc_per_node $NGPUS finetune.py\nIt runs on two GPUs.", 2),
    ("GPUS_PER_NODE=8\nNNODES=${WORLD_SIZE}\ntorchrun $DISTRIBUTED_ARGS pretrain_gpt.py\nOn 8x A100 40GB.", 8),
    ("NPROC_PER_NODE={int(nproc_per_node)} swift sft --model qwen\n8 卡 V100 跑的", 8),
    ("accelerate launch --num_processes $N train.py\n四张 4090", 4),
    ("deepspeed --num_gpus ${GPUS} train.py\n共 16 张卡", 16),
    # 8 per machine with the machines left open: 16 stated in words is two machines' worth.
    ("torchrun --nnodes $NNODES --nproc_per_node 8 train.py\n16 张 A800", 16),
])
def test_an_unresolved_launcher_count_leaves_the_count_to_the_words(text, count):
    assert facts(gpu_count, text)["dist.num_gpus"] == count


@pytest.mark.parametrize("text", [
    "torchrun --nproc_per_node auto train.py",                                   # nothing else says a count
    "torchrun --nnodes $NNODES --nproc_per_node 8 train.py\non 4x A100",          # 4 is no multiple of 8 per machine
    "NNODES=$WORLD_SIZE GPUS_PER_NODE=8 bash run.sh\n用 6 张卡",
    "torchrun --nproc_per_node 4 a.py\ntorchrun --nproc_per_node $N b.py\n8 x A100",  # a stated 4 beside an open one
])
def test_a_count_that_contradicts_the_launcher_or_is_absent_stays_unknown(text):
    assert "dist.num_gpus" not in facts(gpu_count, text)


# --- free: bare numbers are in the unit of the command's flag ---------------------------------------------

FREE_HEADER = "              total        used        free      shared  buff/cache   available\n"
FREE_SMALL = "Mem:            125         121           1           0           2           1\n"


@pytest.mark.parametrize("text, total, available", [
    ("$ free -g\n" + FREE_HEADER + FREE_SMALL, 125, 1),
    ("root@node:~# free -m\n" + FREE_HEADER + "Mem:         128000      120000        1000          10        7000        2000\n", 125, 2000 / 1024),
    ("free -k\n" + FREE_HEADER + "Mem:       131072000   125000000     1000000      10000     5000000     4194304\n", 125, 4),
    ("free --gibi\n" + FREE_HEADER + FREE_SMALL, 125, 1),
])
def test_free_reads_bare_numbers_in_its_flags_unit(text, total, available):
    from oomdoctor.extractors import free_mem
    got = facts(free_mem, text)
    assert got["host.ram_total_gib"] == pytest.approx(total, abs=1e-3)
    assert got["host.ram_available_gib"] == pytest.approx(available, abs=1e-3)


@pytest.mark.parametrize("text", [
    FREE_HEADER + FREE_SMALL,                        # no command shown: 125 KiB is no machine, the unit is unknown
    "free --giga\n" + FREE_HEADER + FREE_SMALL,      # decimal gigabytes
    "free -g --si\n" + FREE_HEADER + FREE_SMALL,
])
def test_free_with_an_unsettled_unit_reads_nothing(text):
    from oomdoctor.extractors import free_mem
    assert not facts(free_mem, text)


# --- a model name's quantisation suffix: only bitsandbytes' 4 bits are NF4 ---------------------------------

@pytest.mark.parametrize("text", [
    "LoRA of TheBloke/Llama-2-70B-chat-GPTQ-4bit on a 4090",
    "LoRA on Qwen2.5-7B-Instruct-AWQ in 4-bit",
    "LoRA of mlx-community/Llama-3-8B-4bit",
    "用 Qwen2.5-7B-Instruct-GPTQ-Int8 做 LoRA，8bit 的",
    "4bit 的 Qwen-72B-Chat-Int4 做 LoRA",
    "LoRA on a GGUF Q4_K_M 4-bit Llama-3-8B",
])
def test_bits_of_another_quantisation_format_are_not_bitsandbytes(text):
    assert observed(text).get("model.load_dtype") not in ("nf4", "fp4", "int8")


@pytest.mark.parametrize("text", [
    "LoRA of unsloth/llama-3-8b-bnb-4bit",
    "用 unsloth/Qwen2.5-7B-Instruct-bnb-4bit 做微调",
    "--model_name_or_path unsloth/Qwen2.5-7B-Instruct-bnb-4bit --finetuning_type lora",
    "4-bit LoRA of Llama-3-8B",
])
def test_bitsandbytes_4_bit_is_nf4(text):
    assert observed(text)["model.load_dtype"] == "nf4"


# --- wordings read in English, now in Chinese too -----------------------------------------------------------

@pytest.mark.parametrize("text", ["整个数据集都加载到内存里了", "把全部数据读进内存再训练", "the whole dataset in RAM"])
def test_a_dataset_held_in_ram_in_both_languages(text):
    assert observed(text)["data.in_memory"] is True


@pytest.mark.parametrize("text", ["显存里放不下整个数据集", "整个数据集加载到显存"])
def test_the_cards_memory_is_not_where_the_dataset_is_held(text):
    assert "data.in_memory" not in observed(text)


@pytest.mark.parametrize("text", ["GRPO，vllm 和训练共用 GPU", "vLLM 与训练放在同一张卡上", "vllm colocate 模式跑 GRPO", "colocated vLLM"])
def test_a_colocated_vllm_in_both_languages(text):
    assert observed(text)["rl.vllm"] == "colocate"


# --- in an answer, a number right before a card's name counts the cards, not what was asked ----------------

@pytest.mark.parametrize("message, value", [
    ("8 A800 80G, the machine has 96 GB of RAM and it ran out of host memory", None),
    ("4 张 A100，num_workers 是 2", 2),
    ("两张 4090，workers 4", 4),
    ("2 x H100, 16 workers", 16),
    ("8", 8),
])
def test_an_answer_does_not_take_a_card_count_for_another_count(message, value):
    from oomdoctor.answers import read
    reading = read(KB.questions["ask_num_workers"], message, KB, {"skip", "不知道"})
    assert reading.value == value
