"""Authentication before work, each channel's consultations its own, proxies, and error paths that
used to fail inside themselves (Flask test client; tests/test_security_live.py has gunicorn)."""
from __future__ import annotations

import hashlib
import hmac
import json
import re
import sqlite3
import time
from urllib.parse import urlencode

import pytest

from oomdoctor.web import create_app, security

SECRET = "test-signing-secret-0123456789"
TOKEN = "s3cret-token-for-tests-0123456789"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.64 GiB"


def make(tmp_path, **config):
    # Not TESTING: an exception is the 500 a client would get, not a test error.
    return create_app({"DATABASE": str(tmp_path / "access.sqlite3"), "SLACK_SIGNING_SECRET": SECRET,
                       "SLACK_RESPONSE_URL_PREFIXES": ("http://127.0.0.1:9/",), **config})


def signed(client, path: str, body: bytes, address: str = "127.0.0.1", timestamp: str | None = None):
    timestamp = timestamp or str(int(time.time()))
    signature = "v0=" + hmac.new(SECRET.encode(), b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    return client.post(path, data=body, content_type="application/x-www-form-urlencoded",
                       headers={"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": signature},
                       environ_base={"REMOTE_ADDR": address})


def command_body(user: str = "U1", team: str = "T1", text: str = "help", n: int = 0) -> bytes:
    return urlencode({"team_id": team, "user_id": user, "channel_id": "C1", "command": "/oom", "text": text,
                      "response_url": f"http://127.0.0.1:9/commands/{n}", "trigger_id": f"1.2.{n}"}).encode()


def rows(app, table: str, columns: str = "*") -> list[tuple]:
    conn = sqlite3.connect(app.config["DATABASE"])
    try:
        return conn.execute(f"SELECT {columns} FROM {table}").fetchall()
    finally:
        conn.close()


# ------------------------------------------------------------------ Slack: the signature before any parsing

@pytest.mark.parametrize("payload", ["[" * 100_000, '{"team":' * 100_000, "{" * 100_000 + "}" * 100_000])
def test_an_unsigned_deep_payload_is_refused_unparsed(tmp_path, payload):
    app = make(tmp_path)
    r = app.test_client().post("/slack/interactions", data=urlencode({"payload": payload}).encode(),
                               content_type="application/x-www-form-urlencoded")
    assert r.status_code == 401
    assert [k for (k,) in rows(app, "rate_limits", "client")] == ["ip:127.0.0.1"]


def test_unsigned_ids_neither_lock_out_a_user_nor_dodge_the_limit(tmp_path):
    app = make(tmp_path, RATE_LIMIT_PER_MINUTE=3)
    client = app.test_client()
    # An attacker claims the victim's ids, and rotates ids, from one address: counted by address.
    codes = [client.post("/slack/commands", data=command_body(user=f"U{i}"),
                         content_type="application/x-www-form-urlencoded",
                         environ_base={"REMOTE_ADDR": "10.6.6.6"}).status_code for i in range(5)]
    assert codes == [401, 401, 401, 429, 429]
    # The victim, signed by Slack from another address, is not locked out.
    assert signed(client, "/slack/commands", command_body(user="U1"), address="10.0.0.2").status_code == 200
    assert not any(k.startswith("slack:") and k != "slack:T1:U1" for (k,) in rows(app, "rate_limits", "client"))


def test_a_verified_slack_user_has_a_budget_of_their_own(tmp_path):
    app = make(tmp_path, RATE_LIMIT_PER_MINUTE=3)
    client = app.test_client()
    # Slack sends from many addresses: one user's requests are counted together after verification.
    codes = [signed(client, "/slack/commands", command_body(n=i), address=f"10.0.1.{i}").status_code for i in range(5)]
    assert codes == [200, 200, 200, 429, 429]
    assert signed(client, "/slack/commands", command_body(user="U2", n=9), address="10.0.1.9").status_code == 200


def test_a_replayed_signed_request_is_answered_once(tmp_path):
    app = make(tmp_path)
    client = app.test_client()
    body = command_body(text="lang zh")
    timestamp = str(int(time.time()))
    assert signed(client, "/slack/commands", body, timestamp=timestamp).status_code == 200
    again = signed(client, "/slack/commands", body, timestamp=timestamp)
    assert again.status_code == 409 and "already answered" in again.get_json()["error"]
    assert len(rows(app, "messages")) + len(rows(app, "consultations")) == 1   # one consultation, stored once
    # A new request (its own signature) is answered.
    assert signed(client, "/slack/commands", command_body(text="lang en", n=1)).status_code == 200


def test_a_replay_is_refused_by_every_worker(tmp_path):
    """Two apps on one file stand for two gunicorn workers: the record of signatures is in the database."""
    one, two = make(tmp_path), make(tmp_path)
    body, timestamp = command_body(), str(int(time.time()))
    assert signed(one.test_client(), "/slack/commands", body, timestamp=timestamp).status_code == 200
    assert signed(two.test_client(), "/slack/commands", body, timestamp=timestamp).status_code == 409


def test_old_signatures_are_forgotten(tmp_path):
    from oomdoctor.storage import Store

    store = Store(tmp_path / "seen.sqlite3")
    try:
        assert store.first_delivery("a", 600, now=1000.0) and not store.first_delivery("a", 600, now=1001.0)
        assert store.first_delivery("b", 600, now=1700.0)            # "a" is now older than the window
        assert store.conn.execute("SELECT key FROM deliveries").fetchall() == [("b",)]
    finally:
        store.close()


ACTION = {"type": "button", "action_id": "x", "block_id": "answer:abc:q", "value": "LoRA"}
MALFORMED = [
    {"type": "block_actions", "actions": "abc"},
    {"type": "block_actions", "actions": ["x"], "user": "U1"},
    {"type": "block_actions", "actions": [ACTION], "user": "U1", "team": "T1", "channel": "C1"},
    {"type": "block_actions", "actions": [ACTION], "user": {"id": 5}, "team": {"id": ["T"]}, "channel": {"id": None}},
    {"type": "block_actions", "actions": [{**ACTION, "block_id": 5}]},
    {"type": "block_actions", "actions": [{**ACTION, "value": {"a": 1}, "text": "x"}], "user": {"id": "U1"}},
    {"type": "block_actions", "actions": [{**ACTION, "type": "static_select", "selected_option": "LoRA"}]},
    {"type": "block_actions", "actions": [{"action_id": "share_report", "value": 7}], "user": {"id": "U1"}},
    {"type": "block_actions", "actions": [{}], "response_url": 12},
    {"type": "block_actions", "actions": {"0": ACTION}},
    {"type": ["block_actions"], "actions": [ACTION]},
    {"type": "block_actions", "actions": [ACTION], "user": {"id": "U1", "team_id": {"x": 1}}},
    [],
    "block_actions",
    None,
    12,
]


@pytest.mark.parametrize("payload", MALFORMED, ids=range(len(MALFORMED)))
def test_malformed_signed_payloads_get_no_server_error(tmp_path, payload):
    app = make(tmp_path)
    r = signed(app.test_client(), "/slack/interactions", urlencode({"payload": json.dumps(payload)}).encode())
    assert r.status_code < 500, r.get_data(as_text=True)[:300]


@pytest.mark.parametrize("body", [
    b"payload=%5B" * 2000, b"payload=" + b"%7B%22a%22%3A" * 5000, b"\xff\xfe", b"team_id=T&team_id=T2&user_id=U",
    b"text=" + b"%00" * 100, b"user_id=" + b"U" * 100_000, b"",
])
def test_malformed_signed_bodies_get_no_server_error(tmp_path, body):
    app = make(tmp_path)
    for path in ("/slack/commands", "/slack/interactions"):
        r = signed(app.test_client(), path, body)
        assert r.status_code < 500, (path, r.get_data(as_text=True)[:300])


# ------------------------------------------------------------------ each channel's consultations are its own

def test_the_page_is_no_side_door_into_api_consultations(tmp_path):
    app = make(tmp_path, API_TOKEN=TOKEN)
    client = app.test_client()
    r = client.post("/api/v1/consultations", json={"message": OOM}, headers={"Authorization": f"Bearer {TOKEN}"})
    cid = r.get_json()["id"]
    assert client.get(f"/c/{cid}").status_code == 404
    client.get("/")
    token = client.get_cookie(security.CSRF_COOKIE).value
    r = client.post(f"/c/{cid}?lang=en", data={"message": "Llama-3-8B", "csrf_token": token})
    assert r.status_code == 404
    r = client.post(f"/c/{cid}?lang=en", data={"message": "Llama-3-8B", "csrf_token": token},
                    headers={"Accept": "application/json"})
    assert r.status_code == 404 and "Llama" not in r.get_data(as_text=True)
    assert len(rows(app, "messages")) == 1   # nothing was added to the API's consultation


def test_the_api_is_no_side_door_into_page_consultations(tmp_path):
    app = make(tmp_path, API_TOKEN=TOKEN)
    client = app.test_client()
    client.get("/")
    token = client.get_cookie(security.CSRF_COOKIE).value
    location = client.post("/?lang=en", data={"message": OOM, "csrf_token": token}).headers["Location"]
    cid = re.search(r"/c/([0-9a-f]{32})", location).group(1)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert client.get(f"/api/v1/consultations/{cid}", headers=auth).status_code == 404
    assert client.post(f"/api/v1/consultations/{cid}/messages", json={"message": "x"}, headers=auth).status_code == 404
    assert client.delete(f"/api/v1/consultations/{cid}", headers=auth).status_code == 404
    assert client.get(f"/c/{cid}").status_code == 200


@pytest.mark.parametrize("body, content_type", [
    (json.dumps({"message": OOM}), "application/json"), (OOM, "text/plain"), ("<a/>", "application/xml")])
def test_the_page_takes_its_own_forms_only(tmp_path, body, content_type):
    app = make(tmp_path)
    client = app.test_client()
    for path in ("/", "/c/" + "0" * 32):
        r = client.post(path, data=body, content_type=content_type, headers={"Accept": "application/json"})
        assert r.status_code == 415 and "/api/v1/" in r.get_json()["error"]
    assert rows(app, "consultations") == []


def test_an_unknown_consultation_without_a_csrf_token_is_told_not_a_500(tmp_path):
    client = make(tmp_path).test_client()
    r = client.post("/c/unknown", data={"message": "x"})
    assert r.status_code == 400 and "<form" in r.get_data(as_text=True)
    r = client.post("/c/" + "0" * 32, data={"message": "x"}, headers={"Accept": "application/json"})
    assert r.status_code == 400 and r.get_json()["error"]


# ------------------------------------------------------------------ proxies

def test_behind_a_trusted_proxy_the_forwarded_address_is_the_client(tmp_path):
    app = make(tmp_path, RATE_LIMIT_PER_MINUTE=2, TRUSTED_PROXIES=1)
    client = app.test_client()
    codes = [client.get("/api/v1/consultations/x", headers={"X-Forwarded-For": f"203.0.113.{i % 2}"}).status_code
             for i in range(5)]
    assert codes == [404, 404, 404, 404, 429]
    assert sorted(k for (k,) in rows(app, "rate_limits", "client")) == ["ip:203.0.113.0", "ip:203.0.113.1"]
    # A client's own X-Forwarded-For in front of the proxy's entry is not taken.
    client.get("/api/v1/consultations/x", headers={"X-Forwarded-For": "198.51.100.7, 203.0.113.5"})
    assert ("ip:198.51.100.7",) not in rows(app, "rate_limits", "client")


def test_with_no_trusted_proxy_forwarded_headers_are_ignored(tmp_path):
    app = make(tmp_path, RATE_LIMIT_PER_MINUTE=100)
    app.test_client().get("/api/v1/consultations/x", headers={"X-Forwarded-For": "203.0.113.1",
                                                              "X-Forwarded-Proto": "https"})
    assert rows(app, "rate_limits", "client") == [("ip:127.0.0.1",)]


def test_the_readme_states_the_defaults_of_the_access_settings():
    from oomdoctor.config import DEFAULTS, ENV_PREFIX

    readme = (security.ROOT / "README.md").read_text(encoding="utf-8")
    for key in ("RATE_LIMIT_PER_MINUTE", "TRUSTED_PROXIES", "API_TOKEN"):
        row = next((line for line in readme.splitlines() if line.startswith(f"| `{ENV_PREFIX}{key}`")), None)
        assert row is not None, f"{ENV_PREFIX}{key} is not in the README's table"
        default = DEFAULTS[key]
        assert (f"`{default}`" in row) if default != "" else ("empty" in row), row
