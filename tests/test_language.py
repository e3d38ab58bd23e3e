"""The reply's language: kept once a consultation has one, until the user writes or asks for another."""
import pytest

from oomdoctor import language


@pytest.mark.parametrize("message", ["bf16", "2048", "yes", "llama3 8b", "skip", "4 x A100", "yes it's on",
                                     "CUDA out of memory, on eight RTX 3090s"])
def test_short_ascii_answers_never_flip_a_chinese_consultation(message):
    assert language.choose(None, message, "zh") == "zh"


def test_a_pasted_english_log_does_not_flip_a_chinese_consultation():
    log = ("Traceback (most recent call last):\n  File \"train.py\", line 88, in <module>\n    trainer.train()\n"
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB "
           "of which 1.02 GiB is free. If reserved but unallocated memory is large try setting "
           "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")
    assert language.choose(None, log, "zh") == "zh"


def test_english_sentences_or_a_request_switch_to_english():
    assert language.choose(None, "I am fine-tuning Llama 3 8B with LoRA on a 4090 and it runs out of memory.", "zh") == "en"
    assert language.choose(None, "in English please", "zh") == "en"
    assert language.choose(None, "请用中文回答", "en") == "zh"


def test_chinese_words_are_the_users_own_and_switch_an_english_consultation():
    assert language.choose(None, "两张卡", "en") == "zh"
    assert language.choose(None, "模型是 Qwen2.5-7B，全参数微调", "en") == "zh"


def test_a_first_message_decides_and_an_explicit_choice_wins():
    assert language.choose(None, "CUDA out of memory", None) == "en"
    assert language.choose(None, "显存不够了", None) == "zh"
    assert language.choose("zh", "CUDA out of memory", "en") == "zh"
