"""The secrets corpus (tests/fixtures/secrets/corpus.yaml): every format and syntax, gone from
everything the service stores or shows on every channel; ordinary log lines come through unchanged.

The channels are the real ones on an app with its own SQLite file: the REST API (a consultation,
its next turn and transcript, one-shot diagnoses), the web page (the form, then the consultation
page), Slack (a signed /slack/commands request, as Slack signs it), and the SQLite file and its
WAL read as raw bytes. A live gunicorn run over HTTP is in test_secrets_live.py.
"""
from __future__ import annotations

import html
import json
import re
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest
import yaml

from oomdoctor.redaction import found, redact
from oomdoctor.redaction.formats import catalog
from test_slack import sign

FIXTURES = Path(__file__).parent / "fixtures" / "secrets"
CORPUS = yaml.safe_load((FIXTURES / "corpus.yaml").read_text(encoding="utf-8"))["entries"]
ORDINARY = yaml.safe_load((FIXTURES / "ordinary.yaml").read_text(encoding="utf-8"))["lines"]
# Everything in one paste, as a user who dumps a whole shell session and its config files would.
PASTED = "\n\n".join(entry["text"] for entry in CORPUS)
SIGNING_SECRET = "test-signing-secret-for-the-secrets-corpus"


def forms(secret: str) -> set[str]:
    """The secret as it may appear in stored or shown text: raw, JSON-escaped, HTML-escaped."""
    return {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1], html.escape(secret)}


def leaks(*outputs: str | bytes) -> list[str]:
    """The corpus entries any of whose secrets appear in any output."""
    texts = [o.decode("utf-8", "replace") if isinstance(o, bytes) else o for o in outputs]
    return sorted({entry["id"] for entry in CORPUS for secret in entry["secrets"]
                   for form in forms(secret) for text in texts if form in text})


# ------------------------------------------------------------------ the detector, entry by entry

def test_the_corpus_covers_many_formats_and_syntaxes():
    assert len(CORPUS) >= 60
    assert len({entry["id"] for entry in CORPUS}) == len(CORPUS)
    assert {entry["class"] for entry in CORPUS} == {"provider token", "wandb key", "assignment", "url", "azure",
                                                   "http header", "flag", "private key", "personal"}


@pytest.mark.parametrize("entry", CORPUS, ids=[entry["id"] for entry in CORPUS])
def test_each_secret_is_removed_and_its_context_kept(entry):
    result = redact(entry["text"])
    assert leaks(result.text) == [], result.text
    assert entry["kept"] in result.text
    assert result.total >= 1 and found(result.text)
    assert len(result.text.encode()) <= len(entry["text"].encode())
    assert redact(result.text).text == result.text


def test_every_provider_format_has_an_example_in_the_corpus():
    """A format no corpus value matches would be an untested claim."""
    untested = [f"{fmt.kind} {fmt.prefix}" for fmt in catalog().formats
                if not any(list(fmt.find(entry["text"])) for entry in CORPUS)]
    assert untested == []


@pytest.mark.parametrize("line", ORDINARY)
def test_ordinary_lines_come_through_unchanged(line):
    result = redact(line)
    assert result.text == line
    assert result.counts == {}


def test_ordinary_lines_together_come_through_unchanged():
    text = "\n".join(ORDINARY)
    assert redact(text).text == text


# ------------------------------------------------------------------ the notice: kinds, distinct values, calm

def test_the_notice_names_kinds_and_counts_distinct_values(client):
    message = ("export HF_TOKEN=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\nHF_TOKEN=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\n"
               "db_password: 'first-Secret-1'\nredis_password: 'second-Secret-2'\n"
               + "".join(f'File "/home/zhangwei/venv/lib/python3.10/site-packages/x{i}.py", line 1\n' for i in range(6))
               + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
    for lang, want in (("en", ["Hugging Face token", "password (2 different values)",
                               "A user name in file paths was hidden."]),
                       ("zh", ["Hugging Face 令牌", "密码（2 个不同的值）", "文件路径中的用户名已隐藏。"])):
        reply = client.post("/api/v1/diagnose", json={"message": message, "lang": lang}).get_json()
        assert reply["notes"][0] == "redacted:hf_token=1,password=2,user=1"
        notices = " ".join(reply["notices"])
        for words in want:
            assert words in notices, notices
        # Six sightings of one user name are one value, and said calmly, without a count.
        assert "6" not in notices


def test_a_user_name_alone_gets_only_the_calm_sentence(client):
    message = "\n".join(f'File "/home/zhangwei/proj/train{i}.py", line 3' for i in range(6))
    reply = client.post("/api/v1/diagnose", json={"message": message}).get_json()
    assert reply["notes"] == ["redacted:user=1"]
    # The one redaction notice; what follows it is the report's own (no cause concluded: what it read and needs).
    assert reply["notices"][0] == "A user name in file paths was hidden."
    assert not any("Removed from your text" in n for n in reply["notices"])


# ------------------------------------------------------------------ every channel, one app, one SQLite file

@pytest.fixture
def secrets_app(tmp_path):
    from oomdoctor.web import create_app

    return create_app({"TESTING": True, "DATABASE": str(tmp_path / "secrets.sqlite3"),
                       "SLACK_SIGNING_SECRET": SIGNING_SECRET, "SLACK_ACK_SECONDS": 120,
                       "RATE_LIMIT_PER_MINUTE": 10 * len(CORPUS),
                       "SLACK_RESPONSE_URL_PREFIXES": ("http://127.0.0.1:9/",)})


def _page_token(client) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', client.get("/").get_data(as_text=True)).group(1)


def _slack_command(client, text: str):
    # Slack escapes &, < and > in the text it sends.
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    body = urlencode({"token": "legacy", "team_id": "T1", "team_domain": "lab", "channel_id": "C1",
                      "channel_name": "training", "user_id": "U1", "user_name": "ada", "command": "/oom",
                      "text": escaped, "api_app_id": "A1", "response_url": "http://127.0.0.1:9/commands/1",
                      "trigger_id": "1.2.3"}).encode()
    timestamp = str(int(time.time()))
    return client.post("/slack/commands", data=body, content_type="application/x-www-form-urlencoded",
                       headers={"X-Slack-Request-Timestamp": timestamp,
                                "X-Slack-Signature": sign(SIGNING_SECRET, timestamp, body)})


def test_no_secret_reaches_any_channel_or_the_database(secrets_app):
    client = secrets_app.test_client()
    shown: dict[str, str] = {}

    r = client.post("/api/v1/consultations", json={"message": PASTED})
    assert r.status_code == 201, r.get_data(as_text=True)[:300]
    shown["REST new consultation"] = r.get_data(as_text=True)
    reply = r.get_json()["reply"]
    assert reply["notes"][0].startswith("redacted:") and len(reply["notices"]) >= 1
    cid = r.get_json()["id"]
    shown["REST next turn"] = client.post(f"/api/v1/consultations/{cid}/messages",
                                          json={"message": PASTED}).get_data(as_text=True)
    shown["REST transcript"] = client.get(f"/api/v1/consultations/{cid}").get_data(as_text=True)
    shown["REST diagnose"] = client.post("/api/v1/diagnose", json={"message": PASTED}).get_data(as_text=True)

    r = client.post("/?lang=en", data={"message": PASTED, "csrf_token": _page_token(client)})
    assert r.status_code == 303, r.get_data(as_text=True)[:300]
    page = client.get(r.headers["Location"])
    assert page.status_code == 200
    shown["web page"] = page.get_data(as_text=True)

    r = _slack_command(client, PASTED)
    assert r.status_code == 200, r.get_data(as_text=True)[:300]
    shown["Slack blocks"] = r.get_data(as_text=True)
    assert '"blocks"' in shown["Slack blocks"]

    database = Path(secrets_app.config["DATABASE"])
    wal = Path(f"{database}-wal")
    stored = {"SQLite file": database.read_bytes(), "SQLite WAL": wal.read_bytes() if wal.exists() else b""}
    assert len(stored["SQLite file"]) + len(stored["SQLite WAL"]) > 0
    # What is stored is the redacted text: its markers are there, so the turns were written.
    assert b"<redacted:hf_token" in stored["SQLite file"] + stored["SQLite WAL"]

    found_leaks = {where: leaks(text) for where, text in {**shown, **stored}.items()}
    assert found_leaks == {where: [] for where in found_leaks}


def test_each_entry_alone_is_absent_from_its_diagnosis(secrets_app):
    """Alone, without the rest of the paste around it: the detectors read context, so each is asked on its own."""
    client = secrets_app.test_client()
    replies = [client.post("/api/v1/diagnose", json={"message": entry["text"]}) for entry in CORPUS]
    assert [r.status_code for r in replies] == [200] * len(CORPUS)
    assert leaks(*(r.get_data(as_text=True) for r in replies)) == []


# ------------------------------------------------------------------ every field of the stateless estimate

def test_estimate_redacts_every_string_at_any_depth(client):
    hf = "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"
    body = {"model": ["llama-3-8b", hf], "gpu": "a100-80gb",
            "config": {"hub_token": "abcDEF123456", "args": ["--hub_token", "ghiJKL789012"],
                       "nested": [{"clientSecret": "Qb2YLKquXVnfHKMLFmxYRGop1UJD"}]}}
    r = client.post("/api/v1/estimate", json=body)
    text = r.get_data(as_text=True)
    assert r.status_code < 500
    for secret in (hf, "abcDEF123456", "ghiJKL789012", "Qb2YLKquXVnfHKMLFmxYRGop1UJD"):
        assert secret not in text
    # A token where a GPU name goes: refused, and not echoed in the message.
    r = client.post("/api/v1/estimate", json={"model": "llama-3-8b", "gpu": hf})
    assert r.status_code == 400 and hf not in r.get_data(as_text=True)
    # A token in a model name that is read: not in the facts either.
    r = client.post("/api/v1/estimate", json={"model": f"llama-3-8b {hf}", "gpu": "a100-80gb"})
    assert hf not in r.get_data(as_text=True)
