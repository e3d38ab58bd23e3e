"""The chat Markdown: a compact report or a numbered question within one chat message, both languages,
and a reply of "2" picking option 2 in the consultation itself."""
from __future__ import annotations

from pathlib import Path

import pytest

from oomdoctor.answers import option_by_number
from oomdoctor.consultation import State, default
from oomdoctor.render import markdown
from oomdoctor.templating import show

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
C = default()
KB = C.kb
TRACEBACK = (CORPUS / "alpaca-76-full-ft-4x-a10.log").read_text(encoding="utf-8")
# Logs whose reports differ in shape: GPU with an estimate, host RAM, not a memory problem.
SAMPLES = ["alpaca-76-full-ft-4x-a10.log", "3drs-7-llava-dataloader-killed.log",
           "accelerate-2586-gemma3-27b-balanced-imbalance.log", "alma-42-zero3-allocator-cache-flushes.log"]
SETUP = "Llama-3-8B full fine-tuning, AdamW, bf16, batch size 8, seq len 4096 on one RTX 4090: CUDA out of memory"


def report(message: str, lang: str | None = None) -> dict:
    reply = C.diagnose(message, lang)
    assert reply["status"] == "report"
    return reply


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_report_says_what_ran_out_the_cause_the_estimate_and_three_remedies(lang):
    reply = report(SETUP, lang)
    text = markdown.render(reply, KB)
    t = lambda key, **kw: KB.text(key, lang, **kw)  # noqa: E731
    assert text.startswith(f"**{t('report.title')}**")
    assert t("kind." + reply["oom_kind"]) in text
    assert reply["diagnoses"][0]["title"] in text and t("markdown.cause") in text
    est = reply["estimate"]
    assert markdown.estimate_line(est, KB, lang) in text
    assert t("report.per_gpu", value=show(est["per_gpu_gib"])) in text
    assert t("report.capacity", value=show(est["gpu_capacity_gib"])) in text and t("report.does_not_fit") in text
    remedies = reply["remedies"]
    assert len(remedies) > 3
    for i, remedy in enumerate(remedies[:3], 1):
        assert f"{i}. **{remedy['title']}**" in text
    assert f"**{remedies[3]['title']}**" not in text
    # Each shown remedy carries its change in a code block.
    assert text.count("```") >= 2 * 3
    assert markdown.size(text) <= markdown.DEFAULT_MAX_CHARS


def test_a_question_numbers_its_options_and_says_a_number_answers():
    state, reply = C.take_turn(State(), TRACEBACK)
    assert reply["status"] == "question"
    text = markdown.render(reply, KB)
    q = reply["questions"][0]
    assert q["text"] in text
    for i, option in enumerate(q["options"], 1):
        assert f"\n{i}. {option['label']}" in text
    assert KB.text("markdown.reply_number", "en") in text
    # Buttons elsewhere: the options can be left out.
    bare = markdown.render(reply, KB, options=False)
    assert q["options"][0]["label"] not in bare and KB.text("report.answer_hint", "en") in bare


def test_a_reply_of_2_picks_option_2_and_a_number_question_takes_2_as_two():
    state, reply = C.take_turn(State(), TRACEBACK)
    options = reply["questions"][0]["options"]
    state, reply = C.take_turn(state, "2")
    model = next(f for f in state.facts if f["name"] == "model.name")
    assert model["value"] == options[1]["value"] and model["source"]["kind"] == "answer"
    # A question whose answer is a number: the options are not numbered and "2" is the value.
    question = KB.questions["ask_seq_len"]
    assert question.answer == "number" and question.options
    assert option_by_number(question, "2") is None
    assert not markdown.numbered({"answer_type": "number", "options": [{"value": 512, "label": "512"}]})


@pytest.mark.parametrize("said, index", [("1", 0), ("#2", 1), ("2)", 1), ("(3)", 2), ("３", 2), (" 2. ", 1),
                                         ("2、", 1)])
def test_option_numbers_in_the_ways_people_type_them(said, index):
    question = KB.questions["ask_method"]
    assert option_by_number(question, said) == question.options[index]["value"]


@pytest.mark.parametrize("said", ["0", "4", "99", "2 gpus", "option two", "", "1.5", "-1", "2" * 3])
def test_anything_else_is_not_an_option_number(said):
    assert option_by_number(KB.questions["ask_method"], said) is None


def test_an_out_of_range_number_is_not_understood_rather_than_guessed():
    state, _ = C.take_turn(State(), TRACEBACK)
    state, reply = C.take_turn(state, "9")
    assert not any(f["name"] == "model.name" for f in state.facts)
    # Not understood: the question is asked once more in other words, not answered with a guess.
    assert state.pending == "ask_model" and "asked_again" in reply["notes"]


@pytest.mark.parametrize("name", SAMPLES)
@pytest.mark.parametrize("limit", [600, 1000, 2000, 4000])
def test_every_report_fits_the_limit_and_keeps_the_cause(name, limit):
    reply = report((CORPUS / name).read_text(encoding="utf-8"))
    text = markdown.render(reply, KB, max_chars=limit)
    assert markdown.size(text) <= limit
    assert KB.text("kind." + reply["oom_kind"], "en") in text
    if reply["diagnoses"]:
        assert reply["diagnoses"][0]["title"] in text
    full = markdown.render(reply, KB, max_chars=markdown.MAX_CHARS)
    if markdown.size(full) > limit:
        assert text.endswith(markdown.italic(KB.text('markdown.truncated', 'en')))
    # Every code block that was opened is closed.
    assert text.count("```") % 2 == 0


def test_a_limit_out_of_bounds_is_clamped():
    reply = report(SETUP)
    assert markdown.size(markdown.render(reply, KB, max_chars=10)) <= markdown.MIN_CHARS
    assert markdown.render(reply, KB, max_chars=10**9) == markdown.render(reply, KB, max_chars=markdown.MAX_CHARS)


def test_fences_outlast_the_code_inside_them():
    body = "print('```')\n```"
    block = markdown.fenced(body)
    fence = block.splitlines()[0]
    assert fence == "````" and block.endswith("\n````") and body in block


def test_size_counts_what_chat_platforms_count():
    assert markdown.size("abc") == 3
    assert markdown.size("显存") == 2
    assert markdown.size("🙂") == 2


def test_an_estimate_renders_its_line_breakdown_and_changes():
    from oomdoctor.named_inputs import estimate_reply

    reply = estimate_reply({"model": "llama3-8b", "method": "full", "batch_size": 4, "seq_len": 2048, "gpu": "4090"},
                           "zh")
    text = markdown.render_estimate(reply, KB)
    assert markdown.estimate_line(reply["estimate"], KB, "zh") in text
    assert KB.text("part.weights", "zh") in text and KB.text("markdown.whatif", "zh") in text
    assert reply["whatif"][0]["title"] in text


@pytest.mark.parametrize("said", ["2", "two", "x2", "2."])
def test_a_bare_number_to_the_gpu_question_is_the_count_and_the_card_is_asked_again(said):
    # "Which GPU does it run on (and how many)?": "2" is two cards, never the second option (RTX 3090).
    question = KB.questions["ask_gpu"]
    assert question.or_count == "dist.num_gpus" and option_by_number(question, said) is None
    state, reply = C.take_turn(State(), "LLaMA-3-8B LoRA, CUDA out of memory. Tried to allocate 2.00 GiB")
    assert reply["questions"] and reply["questions"][0]["id"] == "ask_gpu", reply["questions"]
    assert not markdown.numbered(reply["questions"][0])
    state, reply = C.take_turn(state, said)
    facts = {f["name"]: f for f in state.facts}
    assert facts["dist.num_gpus"]["value"] == 2 and facts["dist.num_gpus"]["source"]["kind"] == "answer"
    assert "gpu.name" not in facts and state.pending == "ask_gpu" and "asked_again" in reply["notes"]
    state, reply = C.take_turn(state, "4090")
    facts = {f["name"]: f["value"] for f in state.facts}
    assert facts["gpu.name"] == "rtx-4090" and facts["dist.num_gpus"] == 2
