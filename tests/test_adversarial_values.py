"""Values out of range, zero, negative or nested deep: a clear 4xx where they are refused, and a
bad fact never poisons a consultation (checked where facts enter and where they are read back)."""
from __future__ import annotations

import json
import sqlite3

import pytest

from oomdoctor import knowledge
from oomdoctor.consultation import Consultant, State, stored_facts
from oomdoctor.estimate.setup import Setup
from oomdoctor.named_inputs import INPUTS, ZERO_STAGES, facts_from_inputs, ranges
from oomdoctor.observation import admissible, observe, refusal
from oomdoctor.web import create_app

KB = knowledge.default()
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.64 GiB"
ZERO_CONFIG = json.dumps({"model_type": "llama", "hidden_size": 0, "num_hidden_layers": 0, "num_attention_heads": 0,
                          "intermediate_size": 0, "vocab_size": 0})


def _app(folder):
    # Not TESTING: an exception becomes the 500 a client would get, not a test error.
    return create_app({"DATABASE": str(folder / "values.sqlite3"), "RATE_LIMIT_PER_MINUTE": 0})


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    return _app(tmp_path_factory.mktemp("values"))


def _rows(app) -> list[tuple]:
    conn = sqlite3.connect(app.config["DATABASE"])
    try:
        return conn.execute("SELECT id, turns FROM consultations").fetchall()
    finally:
        conn.close()


# ------------------------------------------------------------------ /api/v1/estimate: every input in its range

@pytest.mark.parametrize("field, value, says", [
    ("gpu_memory_gib", 0, "above 0"), ("gpu_memory_gib", -0.0, "above 0"), ("gpu_memory_gib", -5, "above 0"),
    ("host_ram_gib", 0, "above 0"), ("params_b", 0, "above 0"),
    ("zero_stage", -1, "from 0 to 3"), ("zero_stage", 7, "from 0 to 3"), ("zero_stage", 4, "from 0 to 3"),
    ("batch_size", 0, "at least 1"), ("seq_len", -2048, "at least 1"), ("num_gpus", 0, "at least 1"),
    ("lora_rank", 0, "at least 1"), ("num_beams", 0, "at least 1"), ("eval_samples", -1, "at least 1"),
    ("batch_size", 10**16, "at most"), ("gpu_memory_gib", 1e300, "at most"),
    # Found by tests/test_fuzz_routes.py: the estimator read each item as a module name (500).
    ("lora_targets", [1, 2], "module names"), ("lora_targets", [None], "module names"),
    ("modules_to_save", [["lm_head"]], "module names"), ("lora_targets", ["q_proj", {"a": 1}], "module names"),
    ("lora_targets", ["q_proj"] * 65, "module names"),
])
def test_estimate_inputs_out_of_range_are_a_400_naming_the_range(app, field, value, says):
    r = app.test_client().post("/api/v1/estimate", json={"model": "llama-3-8b", "method": "lora", field: value})
    assert r.status_code == 400, r.get_data(as_text=True)[:300]
    assert field in r.get_json()["error"] and says in r.get_json()["error"]


@pytest.mark.parametrize("config, says", [
    ("[" * 100_000 + "]" * 100_000, "nests too deeply"),
    ('{"a": ' * 100_000 + "1" + "}" * 100_000, "nests too deeply"),
    (ZERO_CONFIG, "cannot be used"),
    ("{not json", "not valid JSON"),
    ("[1, 2]", "config.json object"),
    (json.dumps({"hidden_size": 4096}), "cannot be used"),
])
def test_a_config_that_gives_no_model_is_a_400(app, config, says):
    r = app.test_client().post("/api/v1/estimate", json={"config": config, "method": "lora"})
    assert r.status_code == 400, r.get_data(as_text=True)[:300]
    assert says in r.get_json()["error"]


def test_a_config_may_be_given_as_an_object(app):
    config = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
              "intermediate_size": 512, "vocab_size": 1000}
    r = app.test_client().post("/api/v1/estimate", json={"config": config, "gpu_memory_gib": 24})
    assert r.status_code == 200, r.get_data(as_text=True)[:300]
    assert r.get_json()["estimate"]["per_gpu_gib"] > 0


def test_values_at_the_ends_of_every_range_are_answered(app):
    client = app.test_client()
    for key in INPUTS:
        bounds = ranges(key)
        if not bounds:
            continue
        low = bounds["minimum"] + (0.5 if bounds.get("exclusiveMinimum") else 0)
        for value in (low, bounds["maximum"]):
            r = client.post("/api/v1/estimate", json={"model": "llama-3-8b", key: value})
            assert r.status_code in (200, 400), (key, value, r.get_data(as_text=True)[:300])


def test_the_published_ranges_are_the_estimators_own():
    """RANGES and the estimator's Setup agree at each end: a value just inside passes both, just outside fails both."""
    from oomdoctor.estimate.whatif import FIELDS

    for key, fact in INPUTS.items():
        bounds, field = ranges(key), FIELDS.get(fact)
        if not bounds or field is None:
            continue
        step = 1 if KB.facts[fact].type == "integer" else 1e-9
        inside = bounds["minimum"] + (step if bounds.get("exclusiveMinimum") else 0)
        outside = bounds["minimum"] - (0 if bounds.get("exclusiveMinimum") else step)
        assert refusal(fact, inside) is None, (key, inside)
        assert refusal(fact, outside) is not None, (key, outside)
    Setup(model=None, zero_stage=ZERO_STAGES[1])
    with pytest.raises(ValueError):
        Setup(model=None, zero_stage=ZERO_STAGES[1] + 1)


def test_named_inputs_never_hold_what_the_estimator_refuses():
    with pytest.raises(ValueError):
        facts_from_inputs({"zero_stage": 4}, KB)
    assert facts_from_inputs({"zero_stage": 3, "gpu_memory_gib": 0.5}, KB) == {"dist.zero_stage": 3,
                                                                               "gpu.memory_gib": 0.5}


# ------------------------------------------------------------------ facts: checked where they enter

def test_an_extractor_that_raises_loses_only_its_own_facts():
    # The catalog divides by the config's zero heads; the rest of the text is still read.
    found = {o.name: o.value for o in observe(ZERO_CONFIG + "\n" + OOM, KB)}
    assert found.get("error.kind") == "cuda_oom" and "model.config" not in found


def test_a_fact_the_estimator_cannot_hold_does_not_enter():
    assert not admissible("dist.zero_stage", 4, KB) and admissible("dist.zero_stage", 3, KB)
    assert not admissible("gpu.memory_gib", 0.0, KB) and not admissible("gpu.memory_gib", -0.0, KB)
    assert not admissible("host.ram_total_gib", 0.0, KB)
    assert not admissible("no.such.fact", 1, KB)
    # A count below 1 enters: the estimator sets it aside itself and says so in its assumptions.
    assert admissible("train.batch_size", 0, KB)
    found = {o.name: o.value for o in observe('{"zero_optimization": {"stage": 4}}\nzero_stage: 4\n' + OOM, KB)}
    assert "dist.zero_stage" not in found


@pytest.mark.parametrize("message", [
    ZERO_CONFIG + "\n" + OOM,
    '{"zero_optimization": {"stage": 4}}\n' + OOM + "\nLlama-3-8B full fine-tuning on 8 GPUs",
    "zero_stage: 4\n" + OOM + "\nLlama-3-8B full fine-tuning",
    "zero_stage: 7 gpu_memory_gib: 0 host_ram_gib: 0\n" + OOM,
])
def test_a_bad_value_in_a_message_is_answered_on_every_endpoint(app, message):
    client = app.test_client()
    assert client.post("/api/v1/diagnose", json={"message": message}).status_code == 200
    r = client.post("/api/v1/consultations", json={"message": message})
    assert r.status_code == 201, r.get_data(as_text=True)[:300]
    cid = r.get_json()["id"]
    for answer in ("Llama-3-8B, LoRA, seq len 2048, batch 4", "skip", "0", "-1", "4"):
        r = client.post(f"/api/v1/consultations/{cid}/messages", json={"message": answer})
        assert r.status_code == 200, (answer, r.get_data(as_text=True)[:300])


def test_an_answer_of_zero_is_not_taken_for_the_hosts_ram():
    consultant = Consultant(KB)
    question = next(q for q in KB.questions.values() if q.fact == "host.ram_total_gib")
    state = State(pending=question.id, asked=[question.id])
    after, reply = consultant.take_turn(state, "0")
    assert not any(f["name"] == "host.ram_total_gib" for f in after.facts)
    assert reply["status"] in ("question", "report")


# ------------------------------------------------------------------ facts: harmless when read back

def _poison(app, cid: str, facts: list) -> None:
    conn = sqlite3.connect(app.config["DATABASE"])
    state = json.loads(conn.execute("SELECT state FROM consultations WHERE id = ?", (cid,)).fetchone()[0])
    state["facts"] = state["facts"] + facts
    conn.execute("UPDATE consultations SET state = ? WHERE id = ?", (json.dumps(state), cid))
    conn.commit()
    conn.close()


BAD_FACTS = [
    {"name": "dist.zero_stage", "value": 4, "source": {"kind": "extractor", "name": "old", "detail": ""}},
    {"name": "gpu.memory_gib", "value": 0.0, "source": {"kind": "answer", "name": "old", "detail": ""}},
    {"name": "host.ram_total_gib", "value": -1.0, "source": {"kind": "answer", "name": "old", "detail": ""}},
    {"name": "fact.renamed.since", "value": 1, "source": {"kind": "extractor", "name": "old", "detail": ""}},
    {"name": "train.batch_size", "value": "four", "source": {"kind": "extractor", "name": "old", "detail": ""}},
    {"name": "train.seq_len", "value": 2048},
    {"value": 3, "source": {"kind": "extractor", "name": "old"}},
    "not a fact",
    None,
]


def test_a_stored_bad_fact_is_harmless_when_read_back(app):
    client = app.test_client()
    cid = client.post("/api/v1/consultations", json={"message": OOM}).get_json()["id"]
    _poison(app, cid, BAD_FACTS)
    for answer in ("Llama-3-8B, LoRA, seq len 2048, batch 4", "full fine-tuning", "skip"):
        r = client.post(f"/api/v1/consultations/{cid}/messages", json={"message": answer})
        assert r.status_code == 200, r.get_data(as_text=True)[:300]
    facts = client.get(f"/api/v1/consultations/{cid}").get_json()["facts"]
    assert not any(f.get("source", {}).get("name") == "old" for f in facts)   # dropped at the next turn


def test_stored_facts_keeps_the_good_ones():
    good = {"name": "train.seq_len", "value": 2048, "source": {"kind": "answer", "name": "ask_seq_len", "detail": "2048"}}
    assert stored_facts([*BAD_FACTS, good], KB) == [good]
    assert stored_facts("not a list", KB) == [] and stored_facts(None, KB) == []


# ------------------------------------------------------------------ a failed first turn leaves nothing behind

def test_a_failed_first_turn_leaves_no_consultation(tmp_path, monkeypatch):
    app = _app(tmp_path)
    consultant = app.extensions["oomdoctor.consultant"]

    def fail(*_args, **_kwargs):
        raise RuntimeError("the turn failed")

    monkeypatch.setattr(consultant, "take_turn", fail)
    client = app.test_client()
    assert client.post("/api/v1/consultations", json={"message": OOM}).status_code == 500
    assert _rows(app) == []
