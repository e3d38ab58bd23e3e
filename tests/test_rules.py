"""The rule set as a whole: no dead rule, and hand-written inputs diagnosed as an expert would.

The fixtures in tests/fixtures/rules/ are small realistic inputs (tracebacks,
configs, nvidia-smi, dmesg, sentences) written for this test, not taken from
the corpus; expected.yaml says what each must be diagnosed as.
"""
from __future__ import annotations

import functools
from pathlib import Path

import pytest
import yaml

from oomdoctor import consultation, knowledge
from oomdoctor.conclusions.evaluation import evaluate
from oomdoctor.consultation import State

ROOT = Path(__file__).resolve().parent
FIXTURES = ROOT / "fixtures" / "rules"
CORPUS = ROOT / "corpus"
EXPECTED = yaml.safe_load((FIXTURES / "expected.yaml").read_text(encoding="utf-8"))


def _fired(consultant, text: str, answer: str | None = None) -> set[str]:
    """Every rule that fires while the text is read and, if given, every question is answered with `answer`."""
    kb = consultant.kb
    fired: set[str] = set()
    state, reply = consultant.take_turn(State(), text, allow_questions=answer is not None)
    fired |= {f.rule.id for f in evaluate(state.memory(), kb, consultant.engine).result.firings}
    for _ in range(4):
        if answer is None or reply["status"] == "report":
            break
        state, reply = consultant.take_turn(state, answer)
        fired |= {f.rule.id for f in evaluate(state.memory(), kb, consultant.engine).result.firings}
    return fired


@functools.lru_cache(maxsize=1)
def fired_anywhere() -> frozenset[str]:
    consultant = consultation.default()
    fired: set[str] = set()
    for sidecar in sorted(CORPUS.glob("*.yaml")):
        label = yaml.safe_load(sidecar.read_text(encoding="utf-8"))
        text = sidecar.with_suffix(".log").read_text(encoding="utf-8")
        fired |= _fired(consultant, text)
        if label.get("needs_answer"):
            fired |= _fired(consultant, text, label["needs_answer"])
    for fixture in sorted(FIXTURES.glob("*.txt")):
        fired |= _fired(consultant, fixture.read_text(encoding="utf-8"))
    return frozenset(fired)


def test_no_dead_rule():
    dead = [rule.id for rule in knowledge.default().rules if rule.id not in fired_anywhere()]
    assert not dead, f"rules that fire on no corpus log and no fixture: {dead}"


def test_every_fixture_has_an_expectation():
    assert {p.stem for p in FIXTURES.glob("*.txt")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_diagnosis(name):
    expected = EXPECTED[name]
    reply = consultation.default().diagnose((FIXTURES / f"{name}.txt").read_text(encoding="utf-8"))
    top = [d["id"] for d in reply["diagnoses"][:3]]
    assert reply["oom_kind"] == expected["oom_kind"], (name, reply["oom_kind"], top)
    assert expected["scenario"] in top, (name, top)
    assert reply["diagnoses"][0]["why"], name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_report_has_remedies_with_a_change(name):
    reply = consultation.default().diagnose((FIXTURES / f"{name}.txt").read_text(encoding="utf-8"))
    assert reply["remedies"], name
    for remedy in reply["remedies"]:
        assert set(remedy["change"]) - {"note"}, (name, remedy["id"])


def test_explanations_fill_their_placeholders():
    """A rule's explanation names facts; when it fires, those facts are there to fill it."""
    consultant = consultation.default()
    for fixture in sorted(FIXTURES.glob("*.txt")):
        for lang in ("en", "zh"):
            reply = consultant.diagnose(fixture.read_text(encoding="utf-8"), lang=lang)
            for diagnosis in reply["diagnoses"]:
                for line in diagnosis["why"]:
                    assert "{" not in line, (fixture.name, lang, line)


def _top(text: str) -> list[str]:
    return [d["id"] for d in consultation.default().diagnose(text)["diagnoses"]]


_OOM_80G = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.77 GiB. GPU 0 has a total capacity of "
            "79.11 GiB of which 2.10 GiB is free. Including non-PyTorch memory, this process has 76.99 GiB memory in use. "
            "Of the allocated memory 70.12 GiB is allocated by PyTorch, and 5.31 GiB is reserved by PyTorch but unallocated.")


@pytest.mark.parametrize("launch, default_applies", [
    ("swift sft --model_type qwen2-vl-7b-instruct --sft_type lora --batch_size 1 --eval_steps 100", False),
    ("python train.py --model_name_or_path Qwen/Qwen2-7B --per_device_train_batch_size 1 --eval_strategy steps "
     "--eval_steps 100", True),
])
def test_the_trainers_default_eval_batch_of_8_only_where_the_trainers_default_applies(launch, default_applies):
    assert ("eval_batch_larger" in _top(launch + "\n" + _OOM_80G)) is default_applies


_SMALL_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 256.00 MiB. GPU 0 has a total capacity of "
              "79.11 GiB of which 120.00 MiB is free. Including non-PyTorch memory, this process has 78.90 GiB memory in use. "
              "Of the allocated memory 76.50 GiB is allocated by PyTorch, and 1.20 GiB is reserved by PyTorch but unallocated.")


def test_activations_do_not_explain_a_failure_before_any_step():
    consultant = consultation.default()
    setup = "LoRA of llama-2-7b, bf16 weights, seq 8192, batch 16, no gradient checkpointing, on one A100 40GB. "
    assert "gpu_activations_share" in _fired(consultant, setup + "It fails on the very first step.\n" + _SMALL_OOM)
    assert "gpu_activations_share" not in _fired(consultant, setup + "It fails while the model is loading.\n" + _SMALL_OOM)
