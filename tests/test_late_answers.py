"""A short reply after a report answers the question the report left open (one the user skipped, or one it
offered), when exactly one such question reads a value from it; otherwise it is read like any message."""
from __future__ import annotations

import pytest

from oomdoctor import consultation
from oomdoctor.consultation import State

OOM_ZH = ("微调的时候爆显存了 torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB。"
          "qwen2.5 7b 全参，4090 一张")
OOM_EN = ("Full fine-tuning Qwen2.5-7B on one RTX 4090 fails: torch.cuda.OutOfMemoryError: CUDA out of memory. "
          "Tried to allocate 2.00 GiB")


@pytest.fixture(scope="module")
def consultant():
    return consultation.default()


def _skipped_length(consultant, first: str, skip: str) -> State:
    state, reply = consultant.take_turn(State(), first)
    assert reply["status"] == "question" and reply["questions"][0]["fact"] == "train.seq_len"
    state, reply = consultant.take_turn(state, skip)
    assert reply["status"] == "report" and state.unknown == ["train.seq_len"]
    return state


def _fact(state: State, name: str) -> dict | None:
    return next((f for f in state.facts if f["name"] == name), None)


@pytest.mark.parametrize("first, skip, late, tokens", [
    (OOM_ZH, "不知道", "4096 左右", 4096),
    (OOM_ZH, "不清楚", "2k", 2048),
    (OOM_EN, "not sure", "8192 tokens", 8192),
])
def test_a_skipped_question_answered_after_the_report_is_its_answer(consultant, first, skip, late, tokens):
    state = _skipped_length(consultant, first, skip)
    state, reply = consultant.take_turn(state, late)
    fact = _fact(state, "train.seq_len")
    assert fact is not None and fact["value"] == tokens
    assert fact["source"]["kind"] == "answer"
    assert "train.seq_len" not in state.unknown
    assert reply["lang"] == ("zh" if first is OOM_ZH else "en")


@pytest.mark.parametrize("late", ["没开", "yes", "A100 80G", "bf16"])
def test_a_reply_that_does_not_answer_the_open_question_leaves_it_open(consultant, late):
    state = _skipped_length(consultant, OOM_ZH, "不知道")
    state, _ = consultant.take_turn(state, late)
    assert _fact(state, "train.seq_len") is None
    assert state.unknown == ["train.seq_len"]


def test_a_new_paste_after_the_report_is_not_read_as_a_late_answer(consultant):
    state = _skipped_length(consultant, OOM_ZH, "不知道")
    state, _ = consultant.take_turn(state, "4096\nTraceback (most recent call last):\n  File \"train.py\", line 12")
    assert _fact(state, "train.seq_len") is None


def test_one_offered_question_takes_a_short_yes_or_no(consultant):
    state, reply = consultant.take_turn(State(), OOM_EN)
    state = State.from_dict({**state.to_dict(), "pending": None, "offered": ["ask_activation_offload"]})
    state, _ = consultant.take_turn(state, "nope")
    fact = _fact(state, "train.activation_offload")
    assert fact is not None and fact["value"] is False and fact["source"]["kind"] == "answer"


def test_two_offered_yes_no_questions_make_a_bare_no_ambiguous(consultant):
    state, _ = consultant.take_turn(State(), OOM_EN)
    state = State.from_dict({**state.to_dict(), "pending": None,
                             "offered": ["ask_activation_offload", "ask_kbit_upcast"]})
    state, _ = consultant.take_turn(state, "no")
    assert _fact(state, "train.activation_offload") is None and _fact(state, "train.kbit_upcast") is None


def test_the_offer_is_kept_with_the_stored_state(consultant):
    text = ("QLoRA on Qwen2.5-14B, one RTX 4090, max_seq_length 8192, batch 2, fails after 200 steps: "
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.64 GiB. GPU 0 has a total capacity "
            "of 23.52 GiB of which 3.12 GiB is free.")
    state, reply = consultant.take_turn(State(), text)
    assert reply["status"] == "report"
    assert state.offered, "an answer-first report offers the set-up questions it did not need"
    assert State.from_dict(state.to_dict()).offered == state.offered
    assert State.from_dict({k: v for k, v in state.to_dict().items() if k != "offered"}).offered == []
