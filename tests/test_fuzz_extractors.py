"""Hypothesis on every extractor: whatever the text, no exception, only known facts, values their spec accepts.

The texts are built from the pieces extractors look for (real log lines, settings
keys, sizes, braces, flags) cut and joined at random, plus arbitrary Unicode, so
that the generator reaches the extractors' deeper branches instead of only their
first regular expression.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from oomdoctor import knowledge
from oomdoctor.extractors import Unknown, config_keys, named_settings, registry, symptoms
from oomdoctor.observation import observe

KB = knowledge.default()
EXTRACTORS = registry()
NEEDS_KB = {"symptoms", "config_keys"}
FIXTURES = Path(__file__).parent / "fixtures" / "logs"
# Examples per test; OOMDOCTOR_FUZZ_EXAMPLES=5000 for a long run (docs/hardening.md has the figures).
EXAMPLES = int(os.environ.get("OOMDOCTOR_FUZZ_EXAMPLES", "150"))
CORPUS = Path(__file__).parent / "corpus"


def _lines() -> list[str]:
    lines: list[str] = []
    for path in sorted(FIXTURES.glob("*.txt")) + sorted(CORPUS.glob("*.log"))[:60]:
        lines.extend(line for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return lines[:4000]


LINES = _lines()
KEYS = sorted({key for setting in KB.settings for key in setting["keys"]})
PHRASES = sorted({p.strip() for s in KB.symptoms.values() for p in s.phrases if p.strip()})[:400]
VALUES = ["4", "0", "-1", "1e400", "inf", "-inf", "nan", "NaN", "1e-30", "99999999999999999999999", "true", "False",
          "None", "null", "'bf16'", '"fp16"', "[q_proj, v_proj]", "[]", "{", "}", "cpu", "nvme", "2.5", "0x10", "١٢",
          "4096", "１２"]
SIZES = ["20.00 MiB", "1.96 GiB", "0 B", "3.06 MiB", "23.69 GiB", "999999999999.999999 TiB", "0.0 GiB", "12 bytes"]
PIECES = ["CUDA out of memory. Tried to allocate ", "(GPU 0; ", " total capacity; ", " already allocated; ", " free; ",
          " reserved in total by PyTorch)", "GPU 0 has a total capacity of ", " of which ", " is free. ",
          "this process has ", " memory in use. ", "Process 1234 has ", "Of the allocated memory ",
          " is allocated by PyTorch, and ", " is reserved by PyTorch but unallocated.",
          "MPS backend out of memory (MPS allocated: ", ", other allocations: ", ", max allowed: ", "). ",
          '"zero_optimization": {', '"stage": ', '"offload_optimizer": {"device": "cpu", "pin_memory": true}', "}",
          '{"num_hidden_layers": ', '"hidden_size": ', '"vocab_size": ', '"model_type": "llama"', ', ',
          "|   0  NVIDIA A100-SXM4-80GB          On  | ", "| 81000MiB / 81920MiB |", "Mem:  ", "total used free",
          "Out of memory: Killed process 42 ", "anon-rss:123456kB", "exit code: -9", "died with <Signals.SIGKILL",
          " 12%|█▏        | 150/1250 [03:10<23:16", "[rank3]: ", "--", "=", ": ", "\n", "  - ", "\t", '"', "'",
          "Llama-3-8B", "qwen2.5 7b", "RTX 4090", "A100 40G", "LoRA", "batch size 4", "seq len 2048", "8x H100",
          "全参数微调", "批大小为 8", "\x1b[31m", "\r", "\u2028", "\ud7ff", "🙂"]

piece = st.one_of(
    st.sampled_from(LINES), st.sampled_from(PIECES), st.sampled_from(SIZES), st.sampled_from(PHRASES),
    st.builds(lambda k, sep, v: f"{k}{sep}{v}", st.sampled_from(KEYS), st.sampled_from(["=", ": ", " ", "=\n"]),
              st.sampled_from(VALUES)),
    st.builds(lambda k, v: f"--{k} {v}", st.sampled_from(KEYS), st.sampled_from(VALUES)),
    st.text(max_size=40),
)
texts = st.lists(piece, max_size=30).map("".join)


def _allowed(extractor) -> set[str]:
    if extractor.name == "symptoms":
        return symptoms.produced_facts(KB)
    if extractor.name == "config_keys":
        return config_keys.produced_facts(KB)
    if extractor.name == "named_settings":
        return named_settings.produced_facts(KB)
    return set(extractor.produces)


def _accepts(name: str, value) -> bool:
    spec = KB.facts[name]
    if spec.type == "number" and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return False  # NaN and infinity are not JSON; no fact may hold them
    return spec.accepts(value)


def run(extractor, text: str) -> list:
    return list(extractor.run(text, KB) if extractor.name in NEEDS_KB else extractor.run(text))


def check(extractor, text: str) -> None:
    allowed = _allowed(extractor)
    findings = run(extractor, text)
    names = [f.name for f in findings]
    assert len(findings) <= 2 * len(allowed) + 4, f"{extractor.name}: {len(findings)} findings"
    for finding in findings:
        assert finding.name in KB.facts, f"{extractor.name} produced unknown fact {finding.name}"
        assert finding.name in allowed, f"{extractor.name} produced {finding.name}, not in its PRODUCES"
        if isinstance(finding.value, Unknown):
            continue  # rules values out for later readers; not a value of its own
        if finding.name != "model.config":
            assert _accepts(finding.name, finding.value), (extractor.name, finding.name, finding.value)
        assert isinstance(finding.detail, str)
    assert len(set(names)) == len(names) or extractor.name in ("accelerator_oom_message",), names


@pytest.mark.parametrize("extractor", EXTRACTORS, ids=[e.name for e in EXTRACTORS])
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=texts)
def test_extractor_never_raises_and_says_only_known_facts(extractor, text):
    check(extractor, text)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts)
def test_observe_keeps_only_accepted_values(text):
    for obs in observe(text, KB):
        assert obs.name in KB.facts
        assert _accepts(obs.name, obs.value) or obs.name == "model.config", (obs.name, obs.value)


@pytest.mark.parametrize("extractor", EXTRACTORS, ids=[e.name for e in EXTRACTORS])
@settings(max_examples=max(60, EXAMPLES // 2), deadline=None)
@given(text=st.text(max_size=300))
def test_extractor_on_arbitrary_unicode(extractor, text):
    check(extractor, text)


@pytest.mark.parametrize("value", ["1e400", "inf", "-inf", "nan", "1e308"])
def test_numbers_too_large_for_a_setting(value):
    """Found by this file: int(float("1e400")) raised OverflowError, a 500 through the API (fixed)."""
    for finding in config_keys.extract(f"per_device_train_batch_size={value}\nlearning_rate={value}", KB):
        assert _accepts(finding.name, finding.value), finding


def test_deepspeed_reads_no_boolean_as_a_number():
    """Found by fuzz/extractors_fuzz.py: JSON true was read as the integer 1 (fixed)."""
    from oomdoctor.extractors import deepspeed

    text = '{"train_micro_batch_size_per_gpu": true, "gradient_accumulation_steps": true, "zero_optimization": {"stage": true}}'
    for finding in deepspeed.extract(text):
        assert _accepts(finding.name, finding.value), finding


def test_deepspeed_reads_no_giant_integer_as_a_count():
    from oomdoctor.extractors import deepspeed

    text = '{"train_micro_batch_size_per_gpu": 1%s, "zero_optimization": {"stage": 3}}' % ("0" * 400)
    findings = list(deepspeed.extract(text))
    assert all(_accepts(f.name, f.value) for f in findings)
    assert "train.batch_size" not in {f.name for f in findings}


def test_an_impossible_size_in_an_oom_message_is_left_unknown():
    """Found by this file: "Tried to allocate 999999999999.999999 TiB" became a fact beyond any magnitude."""
    text = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 999999999999.999999 TiB. GPU 0 has a "
            "total capacity of 79.10 GiB of which 1.00 GiB is free.")
    read = {f.name: f.value for f in run(next(e for e in EXTRACTORS if e.name == "accelerator_oom_message"), text)}
    assert "oom.tried_gib" not in read and "oom.tried_over_free" not in read
    assert read["oom.total_gib"] == 79.1
