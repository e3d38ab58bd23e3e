"""Reading an answer in the user's own words (oomdoctor/answers.py): the asked fact only, precision first."""
import pytest

from oomdoctor import answers, knowledge
from oomdoctor.consultation import default

KB = knowledge.default()
SKIP = default().skip_words


def read(question_id, message):
    return answers.read(KB.questions[question_id], message, KB, SKIP)


@pytest.mark.parametrize("message, value", [
    ("yes it's on", True), ("enabled", True), ("yep, enabled", True), ("Yes.", True), ("it is", True),
    ("开了", True), ("打开了的", True), ("开着", True), ("是的", True),
    ("nope", False), ("Nope.", False), ("no, it's off", False), ("not enabled", False), ("disabled", False),
    ("没开", False), ("没有开", False), ("不是", False), ("关了", False),
])
def test_yes_and_no_in_natural_phrasing(message, value):
    assert read("ask_grad_checkpointing", message).value is value


@pytest.mark.parametrize("message", ["no idea", "not sure", "don't know", "I don't know", "skip", "不知道", "不清楚",
                                     "no idea, a colleague set it up"])
def test_an_explicit_dont_know_is_a_skip_even_for_yes_no(message):
    reading = read("ask_grad_checkpointing", message)
    assert reading.skipped and reading.value is None


def test_a_word_that_merely_contains_a_skip_word_is_not_a_skip():
    assert not read("ask_phase", "it fails in the forward pass").skipped
    assert not read("ask_model", "passed 300 steps then died").skipped


@pytest.mark.parametrize("question, message, value", [
    ("ask_num_gpus", "two", 2), ("ask_num_gpus", "2 of them", 2), ("ask_num_gpus", "两张", 2), ("ask_num_gpus", "八卡", 8),
    ("ask_num_gpus", "4 张", 4), ("ask_num_gpus", "just one", 1), ("ask_num_gpus", "eight RTX 3090s", 8),
    ("ask_num_gpus", "one 3090", 1), ("ask_num_gpus", "十六张", 16),
    ("ask_seq_len", "2k", 2048), ("ask_seq_len", "around 6k tokens", 6144), ("ask_seq_len", "4096 tokens", 4096),
    ("ask_seq_len", "序列长度 2048", 2048), ("ask_batch_size", "16 per device", 16), ("ask_batch_size", "每卡 batch 是 2", 2),
    ("ask_eval_samples", "5k examples in the val split", 5000), ("ask_eval_samples", "验证集 500 条", 500),
    ("ask_host_ram", "125GB", 125), ("ask_host_ram", "机器内存 360G", 360),
])
def test_numbers_with_units_and_words(question, message, value):
    assert read(question, message).value == value


@pytest.mark.parametrize("question, message", [
    ("ask_num_gpus", "bf16"), ("ask_num_gpus", "A100"), ("ask_num_gpus", "fp16 on 3090s"), ("ask_num_gpus", "2 or 4"),
    ("ask_batch_size", "16bit"), ("ask_seq_len", "llama3 8b"), ("ask_num_gpus", "the usual ones"),
])
def test_a_number_inside_a_token_or_an_ambiguous_answer_is_no_count(question, message):
    reading = read(question, message)
    assert reading.value is None and not reading.skipped


def test_several_facts_in_one_answer_give_the_asked_one():
    # The batch belongs to "micro-batch 2", the extractors' reading; the length is the answer.
    assert read("ask_seq_len", "4096 tokens, micro-batch 2, checkpointing enabled").value == 4096
    assert read("ask_batch_size", "batch_size 8，num_generations 8").value == 8


@pytest.mark.parametrize("question, message, value", [
    ("ask_load_dtype", "用的是 bf16", "bf16"), ("ask_load_dtype", "权重 bf16 加载", "bf16"),
    ("ask_load_dtype", "bf16, not 4-bit", "bf16"), ("ask_load_dtype", "bf16 as well", "bf16"),
    ("ask_method", "LoRA (int8 base)", "lora"), ("ask_method", "QLoRA", "qlora"), ("ask_method", "full fine-tuning", "full"),
    ("ask_offload", "no offload", "none"), ("ask_offload", "没有开 offload", "none"), ("ask_offload", "Yes, to CPU", "cpu"),
    ("ask_memory_kind", "the GPU one", "gpu"), ("ask_model", "a 7B Llama 2", "llama-2-7b"),
])
def test_options_named_in_a_sentence(question, message, value):
    assert read(question, message).value == value


@pytest.mark.parametrize("question, message", [
    ("ask_grad_checkpointing", "on a 4090 it fails"),   # "on" as a preposition is no "yes"
    ("ask_after_steps", "一开始就挂了"),                  # "开" inside "一开始" is no "yes"
    ("ask_grad_checkpointing", "关于这个不太清楚"),        # "关" inside "关于" is no "no"
])
def test_yes_and_no_words_inside_other_words_answer_nothing(question, message):
    assert read(question, message).value is None
