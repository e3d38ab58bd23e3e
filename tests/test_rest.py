"""The REST API through Flask's test client, with a real SQLite file."""
import json

import pytest

from pathlib import Path

LOG = (Path(__file__).parent / "fixtures" / "logs" / "cuda_oom_new.txt").read_text()


def test_healthz(client):
    assert client.get("/healthz").get_json() == {"status": "ok"}


def test_consultation_round_trip_and_transcript(client, app):
    r = client.post("/api/v1/consultations", json={"message": LOG})
    assert r.status_code == 201
    body = r.get_json()
    cid, reply = body["id"], body["reply"]
    assert reply["status"] == "question"
    r = client.post(f"/api/v1/consultations/{cid}/messages", json={"message": "llama3 8b lora, seq 2048, bs 4"})
    assert r.status_code == 200
    record = client.get(f"/api/v1/consultations/{cid}").get_json()
    assert [t["message"] for t in record["transcript"]][1].startswith("llama3")
    assert any(f["name"] == "model.name" for f in record["facts"])
    # the file on disk holds it, not the process
    import sqlite3
    rows = sqlite3.connect(app.config["DATABASE"]).execute("select count(*) from messages").fetchone()[0]
    assert rows == 2


def test_reply_json_has_the_contract(client):
    reply = client.post("/api/v1/diagnose", json={"message": "LLaMA-3-8B + LoRA + batch_size=4 on a 4090"}).get_json()
    for key in ("facts", "oom_kind", "diagnoses", "questions", "estimate", "remedies", "assumptions", "lang"):
        assert key in reply
    est = reply["estimate"]
    for key in ("per_gpu_gib", "host_ram_gib", "breakdown", "gpu_capacity_gib", "fits"):
        assert key in est
    for fact in reply["facts"]:
        assert {"name", "value", "source"} <= set(fact)
    for remedy in reply["remedies"]:
        assert {"id", "title", "estimate_after_gib", "change"} <= set(remedy)


def test_lang_override(client):
    reply = client.post("/api/v1/diagnose", json={"message": LOG, "lang": "zh"}).get_json()
    assert reply["lang"] == "zh"


def test_estimate_endpoint(client):
    r = client.post("/api/v1/estimate", json={"model": "Meta-Llama-3.1-8B", "method": "lora", "batch_size": 4,
                                              "seq_len": 2048, "gpu": "RTX 4090"})
    assert r.status_code == 200
    body = r.get_json()
    assert body["estimate"]["gpu_capacity_gib"] > 20
    r = client.post("/api/v1/estimate", json={"model": "no-such-model-xyz"})
    assert r.status_code == 400 and "unknown model" in r.get_json()["error"]
    r = client.post("/api/v1/estimate", json={"batch_sise": 4})
    assert r.status_code == 400 and "did you mean 'batch_size'" in r.get_json()["error"]


@pytest.mark.parametrize("payload, status", [
    ({"message": ""}, 400),
    ({"message": "   \n"}, 400),
    ({"message": 42}, 400),
    ({"mesage": "x"}, 400),
    ({"message": "a\x00b"}, 400),
    ({"message": "x", "lang": "fr"}, 400),
    ([1, 2], 400),
])
def test_bad_input_gets_a_clear_4xx(client, payload, status):
    r = client.post("/api/v1/diagnose", json=payload)
    assert r.status_code == status
    assert r.get_json()["error"]


def test_not_json_and_unknown_ids(client):
    assert client.post("/api/v1/diagnose", data="hello", content_type="text/plain").status_code == 415
    assert client.post("/api/v1/diagnose", data="{bad json", content_type="application/json").status_code == 400
    assert client.get("/api/v1/consultations/nope").status_code == 404
    assert client.post("/api/v1/consultations/nope/messages", json={"message": "x"}).status_code == 404


def test_too_large(tmp_path):
    from oomdoctor.web import create_app
    app = create_app({"TESTING": True, "DATABASE": str(tmp_path / "t.sqlite3"), "MAX_MESSAGE_BYTES": 1000})
    r = app.test_client().post("/api/v1/diagnose", json={"message": "x" * 5000})
    assert r.status_code == 413
    assert "limit" in r.get_json()["error"]


def test_openapi_document(client):
    doc = client.get("/api/openapi.json").get_json()
    assert doc["openapi"].startswith("3.")
    assert "/api/v1/consultations/{cid}/messages" in doc["paths"]


def test_delete(client):
    cid = client.post("/api/v1/consultations", json={"message": LOG}).get_json()["id"]
    assert client.delete(f"/api/v1/consultations/{cid}").status_code == 204
    assert client.get(f"/api/v1/consultations/{cid}").status_code == 404


def test_estimate_inputs_are_redacted(client):
    r = client.post("/api/v1/estimate", json={"model": "hf_abcdefghijklmnopqrstuvwxyzABCDEF123456"})
    assert r.status_code == 400
    assert "hf_abcdefghijklmnopqrstuvwxyz" not in r.get_data(as_text=True)


def test_each_channel_has_its_own_limit(tmp_path):
    from oomdoctor.web import create_app
    app = create_app({"TESTING": True, "DATABASE": str(tmp_path / "t.sqlite3"), "API_MAX_MESSAGE_BYTES": 2000})
    client = app.test_client()
    r = client.post("/api/v1/diagnose", json={"message": "x" * 3000})
    assert r.status_code == 413 and "2000" in r.get_json()["error"]
    with app.test_request_context():
        from oomdoctor.web.input import message_limit
        assert message_limit("slack") == 64 * 1024
        assert message_limit("page") == app.config["MAX_MESSAGE_BYTES"]


def test_redaction_is_said_in_the_users_language(client):
    message = LOG + "\nexport HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789\n用的是 llama3 8b"
    reply = client.post("/api/v1/diagnose", json={"message": message}).get_json()
    assert reply["lang"] == "zh"
    assert any("已从你的文本中移除" in n and "Hugging Face 令牌" in n for n in reply["notices"])
    assert "hf_AbCdEf" not in json.dumps(reply, ensure_ascii=False)
    assert reply["text"].startswith("(")


def test_estimate_refuses_numbers_no_set_up_has(client):
    # 10**400 overflowed the float arithmetic (a 500); any count beyond 1e15 is refused before it gets there
    for name in ("eval_samples", "batch_size", "max_new_tokens", "gpu_memory_gib"):
        resp = client.post("/api/v1/estimate", data='{"model": "llama-3-8b", "%s": 1%s}' % (name, "0" * 400),
                           content_type="application/json")
        assert resp.status_code == 400, name
        assert "at most 1e+15" in resp.get_json()["error"]


def test_a_config_json_beyond_any_model_is_refused_with_the_reason(client):
    huge = ('{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 1%s, '
            '"num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 4, "vocab_size": 10}' % ("0" * 400))
    resp = client.post("/api/v1/estimate", json={"config": huge})
    assert resp.status_code == 400 and "beyond any model" in resp.get_json()["error"]
    # pasted into a conversation it is simply not a model (it overflowed to a 500 before)
    assert client.post("/api/v1/diagnose", json={"message": huge + "\nCUDA out of memory"}).status_code == 200
