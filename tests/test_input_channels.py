"""Every estimator input on every channel (issue #13): a matrix derived from the knowledge base.

The inputs are the named inputs (`named_inputs.INPUTS`, described from knowledge/facts.yaml);
the channels are the CLI flag, the REST field (the OpenAPI document), the MCP argument, a
reader of pasted text (an extractor that produces the fact), a follow-up question, and the
derivation: an input that moves a figure of the estimate shows in the derivation lines, in
English and in Chinese. Nothing here lists which input passes: a new input in facts.yaml and
INPUTS is checked on every channel as it stands. `bench/input_channels.py` prints the matrix.
"""
from __future__ import annotations

import functools
import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from oomdoctor import knowledge
from oomdoctor.conclusions.report import estimate_dict
from oomdoctor.conclusions.sizing import estimate_from, say_derivation
from oomdoctor.named_inputs import (INPUTS, EstimateInputError, describe, estimate_reply, facts_from_inputs,
                                    host_verdict)
from test_estimate_derivation import _keys as _lines

ROOT = Path(__file__).resolve().parents[1]
KB = knowledge.default()
SPECS = {spec.name: spec for spec in describe(KB)}

# Set-ups the inputs are tried in: between them every moment of the step is priced (one card and many,
# LoRA and full, evaluation, RL rollouts with the trainer's generate and with a colocated vLLM, DPO, LoRA
# under FSDP).
CONTEXTS: dict[str, dict[str, Any]] = {
    "lora, one card": {"model": "llama-3-8b", "gpu": "a100-80gb", "method": "lora", "seq_len": 4096, "batch_size": 2},
    "full, fsdp on 8 cards": {"model": "llama-3-8b", "gpu": "h100-80gb", "method": "full", "num_gpus": 8,
                              "strategy": "fsdp", "seq_len": 8192},
    "lora, evaluation keeps logits": {"model": "llama-3-8b", "gpu": "a100-80gb", "method": "lora",
                                      "compute_metrics": True, "eval_samples": 64},
    "grpo lora, generate()": {"model": "qwen2.5-7b", "gpu": "a100-80gb", "method": "lora", "objective": "grpo",
                              "batch_size": 4, "max_new_tokens": 512},
    "grpo full, colocated vLLM, zero-3 on 4 cards": {"model": "qwen2.5-7b", "gpu": "h100-80gb", "method": "full",
                                                    "objective": "grpo", "vllm": "colocate", "num_gpus": 4,
                                                    "strategy": "deepspeed", "zero_stage": 3},
    "dpo full": {"model": "llama-3-8b", "gpu": "h100-80gb", "method": "full", "objective": "dpo"},
    "full, two machines of 4": {"model": "llama-3-8b", "gpu": "h100-80gb", "method": "full", "num_nodes": 2,
                                "gpus_per_node": 4, "strategy": "fsdp", "seq_len": 8192},
    "lora, evaluation generates": {"model": "llama-3-8b", "gpu": "a100-80gb", "method": "lora",
                                   "predict_with_generate": True, "max_new_tokens": 64, "eval_samples": 64},
    "a model by its size": {"params_b": 7.0, "gpu": "rtx-4090", "method": "qlora", "host_ram_gib": 32.0},
    "lora, fsdp on 2 cards": {"model": "mistral-7b-v0.1", "gpu": "a100-40gb", "method": "lora", "num_gpus": 2,
                              "strategy": "fsdp", "seq_len": 4096, "batch_size": 2, "grad_checkpointing": True},
    "prefix tuning (P-tuning v2), one card": {"model": "qwen2.5-7b", "gpu": "rtx-4090", "method": "prefix",
                                             "seq_len": 1024, "batch_size": 4},
}
# Values tried for an input, by its fact's type (an enum tries each of its values).
TRIED = {"boolean": (True, False), "integer": (1, 2, 8), "number": (0.0, 0.5, 0.9),
         "list": ("lm_head", "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj")}
TRIED_BY_NAME = {"model": ("qwen2.5-0.5b", "llama-3-70b"), "gpu": ("rtx-4090",), "params_b": (1.5, 70.0),
                 "gpu_memory_gib": (24.0, 141.0), "host_ram_gib": (16.0, 512.0)}
# What the estimate says about the card and the host given, beside its figures.
VERDICT = ("fits", "gpu_capacity_gib", "headroom_gib", "max_batch_size", "max_seq_len", "min_gpus", "smallest_gpu")
# A pasted config.json: the model's shape from the text (checked in test_estimate); tried with the catalog's Llama 3 8B.
NOT_TRIED = {"config"}


def _values(name: str) -> tuple:
    spec = SPECS[name]
    return TRIED_BY_NAME.get(name) or tuple(spec.values) or TRIED.get(spec.type, ())


@functools.lru_cache(maxsize=None)
def _estimate(items: tuple) -> dict[str, Any] | None:
    try:
        values = facts_from_inputs(dict(items), KB)
        estimation = estimate_from(values)
    except (EstimateInputError, ValueError):
        return None
    if estimation is None:
        return None
    capacity = estimation.setup.gpu_memory_gib
    est = estimate_dict(estimation, capacity)
    keys = set().union(*(_lines(line) for line in estimation.result.derivation))
    # The figures the estimate derives; the verdict also follows the card and the host given (capacities).
    return {"figures": (est["per_gpu_gib"], est["host_ram_gib"], tuple(sorted(est["breakdown"].items()))),
            "verdict": json.dumps([est.get(k) for k in VERDICT] + [host_verdict(est["host_ram_gib"],
                                                                             values.get("host.ram_total_gib"))],
                                  sort_keys=True, default=str),
            "en": tuple(say_derivation(estimation.result, KB, "en")),
            "zh": tuple(say_derivation(estimation.result, KB, "zh")), "keys": frozenset(keys)}


@functools.lru_cache(maxsize=None)
def tried(name: str) -> tuple[dict[str, Any], ...]:
    """Each (context, value) the input was tried in, with what it changed against the context without it."""
    out = []
    for context, inputs in CONTEXTS.items():
        base = {k: v for k, v in inputs.items() if k != name}
        before = _estimate(tuple(sorted(base.items())))
        values = _values(name)
        if before is None and values:
            # Without it there is no estimate (the model): each value is held against the first.
            before, values = _estimate(tuple(sorted({**base, name: _hashable(values[0])}.items()))), values[1:]
        for value in values:
            after = _estimate(tuple(sorted({**base, name: _hashable(value)}.items())))
            if before is None or after is None:
                continue
            out.append({"context": context, "value": value,
                        "figures": after["figures"] != before["figures"],
                        "verdict": after["verdict"] != before["verdict"],
                        "en": after["en"] != before["en"], "zh": after["zh"] != before["zh"],
                        "new_lines": sorted(after["keys"] - before["keys"]),
                        "shown": [line for line in after["en"] if line not in before["en"]]})
    return tuple(out)


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def cli_flags() -> set[str]:
    from oomdoctor.channels.cli import parser

    top = parser()
    sub = next(a for a in top._actions if a.dest == "command")
    return {action.dest for action in sub.choices["estimate"]._actions}


def rest_fields() -> dict[str, dict]:
    from oomdoctor.channels.rest.openapi import document

    doc = document()
    body = doc["paths"]["/api/v1/estimate"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    if "$ref" in body:
        body = doc["components"]["schemas"][body["$ref"].rsplit("/", 1)[1]]
    return body["properties"]


def mcp_arguments() -> set[str]:
    from oomdoctor.channels.mcp.schemas import estimate_arguments

    return set(estimate_arguments(KB)["properties"])


def readers() -> dict[str, list[str]]:
    """Fact -> the extractors that read it from pasted text (configs, commands, logs, sentences)."""
    from oomdoctor.extractors import config_keys, registry, symptoms

    out: dict[str, list[str]] = {}
    for extractor in registry():
        facts = set(extractor.produces)
        if extractor.name == config_keys.NAME:
            facts |= config_keys.produced_facts(KB)
        if extractor.name == symptoms.NAME:
            facts |= symptoms.produced_facts(KB)
        for fact in facts:
            out.setdefault(fact, []).append(extractor.name)
    return out


def questions() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for q in KB.questions.values():
        out.setdefault(q.fact, []).append(q.id)
    return out


def matrix() -> list[dict[str, Any]]:
    """One row per named input: the channels that carry it (the table bench/input_channels.py prints)."""
    flags, fields, arguments, read, asked = cli_flags(), rest_fields(), mcp_arguments(), readers(), questions()
    rows = []
    for name, fact in INPUTS.items():
        runs = tried(name) if name not in NOT_TRIED else ()
        rows.append({"input": name, "fact": fact, "cli": name in flags, "rest": name in fields, "mcp": name in arguments,
                     "readers": read.get(fact, []), "questions": asked.get(fact, []),
                     "moves": any(r["figures"] for r in runs), "verdict": any(r["verdict"] for r in runs),
                     "shown_en": any(r["en"] for r in runs),
                     "shown_zh": any(r["zh"] for r in runs),
                     "lines": sorted({k for r in runs for k in r["new_lines"] if k.startswith("derive.")})})
    return rows


# ---------------------------------------------------------------- the table-driven checks, one row an input

@pytest.mark.parametrize("name", sorted(INPUTS))
def test_the_input_is_a_cli_flag_a_rest_field_and_an_mcp_argument_with_its_facts_values(name):
    assert name in cli_flags(), f"--{name.replace('_', '-')} is not a flag of `estimate`"
    field = rest_fields().get(name)
    assert field is not None, f"{name} is not a field of POST /api/v1/estimate"
    spec = SPECS[name]
    if spec.values:
        assert field["enum"] == list(spec.values), name
    elif spec.type in ("integer", "number", "boolean") and name not in ("model", "gpu"):
        assert field["type"] == spec.type, name
    assert name in mcp_arguments(), f"{name} is not an argument of the MCP estimate tool"


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_the_input_has_a_reader_of_pasted_text(name):
    assert readers().get(INPUTS[name]), f"no extractor reads {INPUTS[name]} from a config, command, log or sentence"


@pytest.mark.parametrize("name", sorted(set(INPUTS) - NOT_TRIED))
def test_a_figure_the_input_moves_is_shown_in_the_derivation_in_both_languages(name):
    runs = tried(name)
    assert runs, f"{name}: no value of it makes an estimate in any context"
    for run in runs:
        if run["figures"]:
            assert run["en"], f"{name}={run['value']!r} in '{run['context']}' moves the figures, no derivation line says why"
        assert run["en"] == run["zh"], f"{name}={run['value']!r} in '{run['context']}': the languages disagree"
    assert any(r["figures"] or r["verdict"] or r["en"] for r in runs), f"{name} changes nothing in any context"


@pytest.mark.parametrize("question", sorted(q.id for q in KB.questions.values() if q.fact in INPUTS.values()),
                         ids=str)
def test_a_question_on_an_input_has_answers_that_change_the_estimate(question):
    """A follow-up question on an estimator input is asked where the answer changes the reply: some
    two of its options give different estimates in one of the contexts."""
    q = KB.questions[question]
    name = next(n for n, f in INPUTS.items() if f == q.fact)
    changed = False
    for inputs in CONTEXTS.values():
        base = {k: v for k, v in inputs.items() if k != name}
        answers = [_estimate(tuple(sorted({**base, name: _hashable(o["value"])}.items()))) for o in q.options]
        changed |= len({(a["figures"], a["verdict"]) for a in answers if a}) > 1
    assert changed, f"{question}: no two answers give different estimates in any context"


# ---------------------------------------------------------------- real channels, end to end

# A set-up that sets issue #13's inputs together (full GRPO on four H100s in colocated vLLM, context and
# tensor parallel, a fused loss, activation offloading, optimizer in backward, FP8, two machines).
TOGETHER = {"model": "llama-3-8b", "gpu": "h100-80gb", "method": "full", "objective": "grpo", "seq_len": 4096,
            "batch_size": 2, "num_nodes": 2, "gpus_per_node": 4, "strategy": "fsdp", "context_parallel": 2,
            "tensor_parallel": 2, "loss": "fused_linear", "liger_kernels": True, "activation_offload": True,
            "optimizer_in_backward": True, "fp8": "te", "vllm": "colocate", "vllm_gpu_memory_utilization": 0.4,
            "vllm_sleep": True, "beta": 0.04, "reward_model": True, "max_new_tokens": 1024, "num_generations": 8,
            "steps_per_generation": 2, "max_prompt_length": 512}


def _expected(lang: str) -> list[str]:
    return estimate_reply(TOGETHER, lang)["estimate"]["derivation"]


def _shown_lines(name: str, lang: str) -> list[str]:
    """The derivation lines of TOGETHER that only the input brings (TOGETHER without it lacks them)."""
    without = {k: v for k, v in TOGETHER.items() if k != name}
    if name in ("num_nodes", "gpus_per_node"):
        without = {k: v for k, v in without.items() if k not in ("num_nodes", "gpus_per_node")}
    try:
        before = set(estimate_reply(without, lang)["estimate"]["derivation"])
    except EstimateInputError:
        return []
    return [line for line in _expected(lang) if line not in before]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "oomdoctor", "estimate", *args], capture_output=True, text=True,
                          timeout=180, cwd=ROOT)


def _flags(inputs: dict[str, Any]) -> list[str]:
    out = []
    for name, value in inputs.items():
        out += ["--" + name.replace("_", "-"), str(value).lower() if isinstance(value, bool) else str(value)]
    return out


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_cli_renders_every_inputs_derivation_line(lang):
    out = _cli(*_flags(TOGETHER), "--lang", lang)
    assert out.returncode == 0, out.stderr
    for name in TOGETHER:
        for line in _shown_lines(name, lang):
            assert f"· {line}" in out.stdout, (name, line)
    if lang == "zh":
        assert "上下文并行" in out.stdout and "张量并行" in out.stdout and "激活卸载" in out.stdout
    else:
        assert "context parallel over 2 GPUs" in out.stdout and "activation offloading" in out.stdout


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from conftest import LiveServer

    live = LiveServer(tmp_path_factory.mktemp("inputs"), workers=1).start()
    yield live
    live.stop()


def _post(server, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(server.url + "/api/v1/estimate", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.mark.server
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_rest_over_gunicorn_takes_every_input_and_words_its_derivation(server, lang):
    status, reply = _post(server, {**TOGETHER, "lang": lang})
    assert status == 200, reply
    assert reply["estimate"]["derivation"] == _expected(lang)
    facts = {f["name"]: f["value"] for f in reply["facts"]}
    for name, value in TOGETHER.items():
        if name not in ("model", "gpu"):
            assert facts[INPUTS[name]] == value, name
    for name in TOGETHER:
        for line in _shown_lines(name, lang):
            assert line in reply["estimate"]["derivation"], (name, line)
    status, refused = _post(server, {**TOGETHER, "vllm_gpu_memory_utilization": "most", "lang": lang})
    assert status == 400 and "vllm_gpu_memory_utilization" in refused["error"]


# ---------------------------------------------------------------- follow-up questions in a consultation

GRPO_COLOCATED = (ROOT / "tests" / "fixtures" / "rules" / "grpo_vllm_colocate_share_unstated.txt").read_text()
LONG_CONTEXT_FSDP = (
    "torchrun --nproc_per_node 8 train.py --model_name_or_path meta-llama/Llama-3.1-8B --bf16 "
    "--per_device_train_batch_size 1 --max_seq_length 65536 --gradient_checkpointing --fsdp 'full_shard auto_wrap' "
    "--attn_implementation flash_attention_2\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 15.66 GiB. "
    "GPU 0 has a total capacity of 79.19 GiB of which 3.02 GiB is free.")


def _until(consultant, text: str, lang: str, wanted: str, answers: dict[str, str]):
    """Answer the consultation's questions until `wanted` is asked; the state and reply at that point."""
    from oomdoctor.consultation import State

    state, reply = consultant.take_turn(State(), text, lang=lang)
    for _ in range(4):
        asked = reply["questions"][0]["id"] if reply["questions"] else None
        if asked in (wanted, None):
            break
        state, reply = consultant.take_turn(state, answers.get(asked, "skip"), lang=lang)
    return state, reply


@pytest.mark.parametrize("lang, share_words", [("en", "vllm_gpu_memory_utilization"), ("zh", "共用 GPU 的 vLLM")])
def test_vllms_share_is_asked_in_a_colocated_grpo_oom_and_the_answer_moves_the_estimate(lang, share_words):
    from oomdoctor.consultation import default

    consultant = default()
    state, reply = _until(consultant, GRPO_COLOCATED, lang, "ask_vllm_share", {"ask_seq_len": "1536"})
    question = reply["questions"][0]
    assert question["id"] == "ask_vllm_share" and share_words in question["text"]
    before = reply["estimate"]["per_gpu_gib"]
    state, after = consultant.take_turn(state, "0.9", lang=lang)
    assert {"name": "rl.vllm_memory_share", "value": 0.9} in [{"name": f["name"], "value": f["value"]}
                                                              for f in after["facts"]]
    assert after["estimate"]["per_gpu_gib"] > before + 30          # 0.6 more of an 80 GB card
    assert after["diagnoses"][0]["id"] == "rl_rollout_memory"
    assert any("0.9 ×" in line for line in after["estimate"]["derivation"])


@pytest.mark.parametrize("lang, answer", [("en", "4"), ("zh", "切成 4 份")])
def test_the_context_parallel_degree_is_asked_for_a_long_context_on_8_gpus_and_divides_the_estimate(lang, answer):
    from oomdoctor.consultation import default

    consultant = default()
    state, reply = _until(consultant, LONG_CONTEXT_FSDP, lang, "ask_context_parallel", {"ask_loss": "1"})
    assert reply["questions"][0]["id"] == "ask_context_parallel"
    before = reply["estimate"]["per_gpu_gib"]
    state, after = consultant.take_turn(state, answer, lang=lang)
    facts = {f["name"]: f["value"] for f in after["facts"]}
    assert facts.get("dist.context_parallel") == 4
    assert after["estimate"]["per_gpu_gib"] < before / 2
    words = "context parallel over 4 GPUs" if lang == "en" else "上下文并行，4 张 GPU"
    assert any(words in line for line in after["estimate"]["derivation"])


def test_a_pasted_tensor_parallel_config_that_does_not_fit_is_diagnosed_and_its_fewest_gpus_divide_the_groups():
    """min_gpus tried GPU counts the parallel groups do not divide: the set-up refused them and diagnose raised."""
    from oomdoctor.consultation import default

    text = ("base_model: meta-llama/Meta-Llama-3-8B\ntensor_parallel_size: 2\nsequence_len: 2048\nmicro_batch_size: 1\n"
            "gradient_checkpointing: true\nbf16: true\n2x A100 40GB\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
    est = default().diagnose(text)["estimate"]
    assert est["fits"] is False and any("tensor parallel over 2 GPUs" in line for line in est["derivation"])
    assert est["min_gpus"] is not None and est["min_gpus"] > 2 and est["min_gpus"] % 2 == 0
