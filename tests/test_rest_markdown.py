"""`?format=markdown` on the REST replies: the same JSON with `text` as chat Markdown, a numbered
question that a reply of "2" answers, a size bound, and a clear 400 (before any work) for a bad query."""
from __future__ import annotations

from pathlib import Path

import pytest

from oomdoctor.render import markdown
from oomdoctor.storage import Store

TRACEBACK = (Path(__file__).parent / "corpus" / "alpaca-76-full-ft-4x-a10.log").read_text(encoding="utf-8")
SETUP = "Llama-3-8B full fine-tuning, AdamW, bf16, batch size 8, seq len 4096 on one RTX 4090: CUDA out of memory"


def stored(app) -> int:
    store = Store(app.config["DATABASE"], migrate=False)
    try:
        return store.conn.execute("SELECT count(*) FROM consultations").fetchone()[0]
    finally:
        store.close()


def test_a_consultation_in_markdown_is_answered_by_an_option_number(client):
    resp = client.post("/api/v1/consultations?format=markdown", json={"message": TRACEBACK})
    assert resp.status_code == 201
    body = resp.get_json()
    reply = body["reply"]
    question = reply["questions"][0]
    assert f"\n2. {question['options'][1]['label']}" in reply["text"]
    assert set(reply) >= {"status", "facts", "diagnoses", "questions", "estimate", "remedies"}
    second = client.post(f"/api/v1/consultations/{body['id']}/messages?format=markdown", json={"message": "2"})
    assert second.status_code == 200
    facts = client.get(f"/api/v1/consultations/{body['id']}").get_json()["facts"]
    model = next(f for f in facts if f["name"] == "model.name")
    assert model["value"] == question["options"][1]["value"]
    assert "**" in second.get_json()["reply"]["text"]


def test_the_default_text_is_unchanged(client):
    plain = client.post("/api/v1/diagnose", json={"message": SETUP}).get_json()
    chat = client.post("/api/v1/diagnose?format=markdown", json={"message": SETUP}).get_json()
    assert plain["text"] != chat["text"] and chat["text"].startswith("**")
    assert {k: v for k, v in plain.items() if k != "text"} == {k: v for k, v in chat.items() if k != "text"}
    assert client.post("/api/v1/diagnose?format=text", json={"message": SETUP}).get_json()["text"] == plain["text"]


@pytest.mark.parametrize("limit", [markdown.MIN_CHARS, 1000])
def test_max_chars_bounds_the_message(client, limit):
    text = client.post(f"/api/v1/diagnose?format=markdown&max_chars={limit}", json={"message": SETUP}).get_json()["text"]
    assert markdown.size(text) <= limit
    assert markdown.size(client.post("/api/v1/diagnose?format=markdown&max_chars=40000",
                                     json={"message": SETUP}).get_json()["text"]) > limit


def test_an_estimate_in_markdown(client):
    resp = client.post("/api/v1/estimate?format=markdown",
                       json={"model": "llama3-8b", "method": "lora", "gpu": "4090", "batch_size": 4, "seq_len": 2048})
    assert resp.status_code == 200
    body = resp.get_json()
    assert markdown.estimate_line(body["estimate"], client.application.extensions["oomdoctor.consultant"].kb,
                                  "en") in body["text"]


@pytest.mark.parametrize("query", ["format=html", "format=", "format=markdown&max_chars=599",
                                   "format=markdown&max_chars=40001", "format=markdown&max_chars=2k",
                                   "format=markdown&max_chars=%EF%BC%92%EF%BC%90%EF%BC%90%EF%BC%90",
                                   "max_chars=2000"])
def test_a_bad_query_is_a_400_and_changes_nothing(app, client, query):
    resp = client.post(f"/api/v1/consultations?{query}", json={"message": TRACEBACK})
    assert resp.status_code == 400
    assert "format" in resp.get_json()["error"] or "max_chars" in resp.get_json()["error"]
    assert stored(app) == 0
    assert client.post(f"/api/v1/estimate?{query}", json={"model": "llama3-8b"}).status_code == 400


def test_the_openapi_document_describes_the_format(client):
    doc = client.get("/api/openapi.json").get_json()
    for path in ("/api/v1/consultations", "/api/v1/diagnose", "/api/v1/estimate", "/api/v1/consultations/{cid}/messages"):
        names = {p["name"] for p in doc["paths"][path]["post"]["parameters"]}
        assert {"format", "max_chars"} <= names
