"""Access and hygiene through the Flask test client: token, rate limits, CSRF, headers, owner, retention, errors."""
from __future__ import annotations

import re
import sqlite3
import time
from pathlib import Path

import pytest
from flask import render_template_string

from oomdoctor.knowledge import ROOT
from oomdoctor.web import create_app, security

LOG = (Path(__file__).parent / "fixtures" / "logs" / "cuda_oom_new.txt").read_text()
TOKEN = "s3cret-token-for-tests-0123456789"


def make(tmp_path, **config):
    return create_app({"TESTING": True, "DATABASE": str(tmp_path / "sec.sqlite3"), **config})


# ------------------------------------------------------------------ headers

def test_every_response_has_the_security_headers(client):
    responses = [client.get("/healthz"), client.get("/api/openapi.json"), client.get("/api/v1/consultations/nope"),
                 client.post("/api/v1/diagnose", data="x", content_type="text/plain"), client.get("/"),
                 client.get("/no/such/page"), client.get("/static/page.css")]
    for r in responses:
        assert r.headers["Content-Security-Policy"] == security.CSP
        assert "unsafe-inline" not in r.headers["Content-Security-Policy"]
        assert r.headers["X-Content-Type-Options"] == "nosniff"
        assert r.headers["X-Frame-Options"] == "DENY"
        assert r.headers["Referrer-Policy"] == "no-referrer"
    assert client.get("/api/v1/consultations/nope").headers["Cache-Control"] == "no-store"


# ------------------------------------------------------------------ API token

def test_api_token_is_required_when_set(tmp_path):
    client = make(tmp_path, API_TOKEN=TOKEN).test_client()
    r = client.post("/api/v1/diagnose", json={"message": "llama3 8b lora"})
    assert r.status_code == 401 and "Bearer" in r.get_json()["error"]
    assert r.headers["WWW-Authenticate"].startswith("Bearer")
    r = client.post("/api/v1/diagnose", json={"message": "x"}, headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401 and "not valid" in r.get_json()["error"]
    r = client.post("/api/v1/diagnose", json={"message": "x"}, headers={"Authorization": "Basic " + TOKEN})
    assert r.status_code == 401
    r = client.post("/api/v1/diagnose", json={"message": "llama3 8b lora"}, headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200
    # Open without a token: health, the API's description, the page.
    assert client.get("/healthz").status_code == 200
    assert client.get("/api/openapi.json").status_code == 200
    assert client.get("/").status_code == 200


def test_several_tokens_for_rotation(tmp_path):
    client = make(tmp_path, API_TOKEN=f"old-token-aaaaaaaaaaaa, {TOKEN}").test_client()
    for token in ("old-token-aaaaaaaaaaaa", TOKEN):
        assert client.get("/api/v1/consultations/x", headers={"Authorization": f"Bearer {token}"}).status_code == 404


def test_the_token_comparison_is_constant_time():
    import inspect
    assert "compare_digest" in inspect.getsource(security._token_ok)


# ------------------------------------------------------------------ rate limits

def test_rate_limit_per_ip_with_retry_after(tmp_path):
    client = make(tmp_path, RATE_LIMIT_PER_MINUTE=3).test_client()
    codes = [client.get("/api/v1/consultations/x").status_code for _ in range(3)]
    assert codes == [404, 404, 404]
    r = client.get("/api/v1/consultations/x")
    assert r.status_code == 429
    assert 1 <= int(r.headers["Retry-After"]) <= 60
    assert "limit is 3" in r.get_json()["error"]
    # Health checks are never limited.
    assert all(client.get("/healthz").status_code == 200 for _ in range(5))
    # Another address has its own budget.
    assert client.get("/api/v1/consultations/x", environ_base={"REMOTE_ADDR": "10.0.0.9"}).status_code == 404


def test_rate_limit_is_shared_by_workers_through_the_file(tmp_path):
    """Two apps on one database stand for two gunicorn workers: they count together."""
    one, two = make(tmp_path, RATE_LIMIT_PER_MINUTE=4), make(tmp_path, RATE_LIMIT_PER_MINUTE=4)
    a, b = one.test_client(), two.test_client()
    codes = [c.get("/api/v1/consultations/x").status_code for c in (a, b, a, b, a, b)]
    assert codes == [404, 404, 404, 404, 429, 429]
    rows = sqlite3.connect(tmp_path / "sec.sqlite3").execute("SELECT client, hits FROM rate_limits").fetchall()
    assert rows == [("ip:127.0.0.1", 6)]


def test_rate_limit_per_token_across_addresses(tmp_path):
    client = make(tmp_path, RATE_LIMIT_PER_MINUTE=3, API_TOKEN=TOKEN, TRUSTED_PROXIES=1).test_client()
    auth = {"Authorization": f"Bearer {TOKEN}"}
    codes = [client.get("/api/v1/consultations/x", headers={**auth, "X-Forwarded-For": f"10.0.0.{i}"}).status_code
             for i in range(5)]
    assert codes == [404, 404, 404, 429, 429]
    # The token is never stored, only a hash of it.
    rows = [r[0] for r in sqlite3.connect(tmp_path / "sec.sqlite3").execute("SELECT client FROM rate_limits")]
    assert not any(TOKEN in r for r in rows) and any(r.startswith("token:") for r in rows)


def test_forwarded_for_is_ignored_without_trusted_proxies(tmp_path):
    client = make(tmp_path, RATE_LIMIT_PER_MINUTE=2).test_client()
    codes = [client.get("/api/v1/consultations/x", headers={"X-Forwarded-For": f"10.1.1.{i}"}).status_code
             for i in range(3)]
    assert codes == [404, 404, 429]


def test_rate_limit_off(tmp_path):
    client = make(tmp_path, RATE_LIMIT_PER_MINUTE=0).test_client()
    assert all(client.get("/api/v1/consultations/x").status_code == 404 for _ in range(10))
    assert sqlite3.connect(tmp_path / "sec.sqlite3").execute("SELECT count(*) FROM rate_limits").fetchone()[0] == 0


# ------------------------------------------------------------------ CSRF

def _token(client) -> str:
    html = client.get("/").get_data(as_text=True)
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    if match:
        return match.group(1)
    # Until the page's forms carry the field, read the cookie the page set.
    cookie = client.get_cookie(security.CSRF_COOKIE)
    assert cookie is not None, "the page did not set the CSRF cookie"
    return cookie.value


def test_form_post_without_csrf_token_is_refused(client, app):
    r = client.post("/", data={"message": LOG})
    assert r.status_code == 400
    r = client.post("/", data={"message": LOG, "csrf_token": "x" * 43})
    assert r.status_code == 400
    # Nothing was stored for a refused form.
    assert sqlite3.connect(app.config["DATABASE"]).execute("SELECT count(*) FROM consultations").fetchone()[0] == 0


def test_form_post_with_csrf_token_passes(app):
    client = app.test_client()
    with app.test_request_context("/"):
        field = render_template_string('<input type="hidden" name="csrf_token" value="{{ csrf_token() }}">')
    assert 'name="csrf_token"' in field
    client.get("/")
    token = _token(client)
    r = client.post("/?lang=en", data={"message": LOG, "csrf_token": token})
    assert r.status_code == 303, r.get_data(as_text=True)[:300]
    # A token from another browser (another cookie) does not pass.
    other = app.test_client()
    other.get("/")
    assert other.post("/?lang=en", data={"message": LOG, "csrf_token": token}).status_code == 400


def test_csrf_cookie_is_http_only_and_same_site(client):
    r = client.get("/")
    cookie = next((h for h in r.headers.getlist("Set-Cookie") if h.startswith(security.CSRF_COOKIE)), "")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie


def test_csrf_does_not_apply_to_api_slack_or_json(client):
    assert client.post("/api/v1/diagnose", json={"message": "llama3 8b lora"}).status_code == 200
    r = client.post("/slack/commands", data={"text": "help"})
    assert r.status_code != 400 or "reload the page" not in r.get_data(as_text=True)
    r = client.post("/", json={"message": LOG})
    assert "reload the page" not in r.get_data(as_text=True) and "expired" not in r.get_data(as_text=True)


def test_csrf_can_be_turned_off(tmp_path):
    client = make(tmp_path, CSRF_ENABLED=False).test_client()
    assert client.post("/?lang=en", data={"message": LOG}).status_code == 303


# ------------------------------------------------------------------ owner

def test_delete_is_owner_checked_when_an_owner_is_known(client):
    cid = client.post("/api/v1/consultations", json={"message": LOG}, headers={"X-Owner": "alice"}).get_json()["id"]
    r = client.delete(f"/api/v1/consultations/{cid}")
    assert r.status_code == 403 and "owner" in r.get_json()["error"]
    assert client.delete(f"/api/v1/consultations/{cid}", headers={"X-Owner": "bob"}).status_code == 403
    assert client.get(f"/api/v1/consultations/{cid}").status_code == 200
    assert client.delete(f"/api/v1/consultations/{cid}", headers={"X-Owner": "alice"}).status_code == 204
    assert client.delete(f"/api/v1/consultations/{cid}", headers={"X-Owner": "alice"}).status_code == 404


# ------------------------------------------------------------------ retention

def _age(database, cid, seconds):
    conn = sqlite3.connect(database)
    conn.execute("UPDATE consultations SET updated = updated - ? WHERE id = ?", (seconds, cid))
    conn.commit()
    conn.close()


def test_expired_consultations_are_swept_at_start(tmp_path):
    app = make(tmp_path, RETENTION_SECONDS=3600)
    client = app.test_client()
    old = client.post("/api/v1/consultations", json={"message": LOG}).get_json()["id"]
    new = client.post("/api/v1/consultations", json={"message": LOG}).get_json()["id"]
    _age(app.config["DATABASE"], old, 7200)
    again = make(tmp_path, RETENTION_SECONDS=3600).test_client()
    assert again.get(f"/api/v1/consultations/{old}").status_code == 404
    assert again.get(f"/api/v1/consultations/{new}").status_code == 200
    conn = sqlite3.connect(app.config["DATABASE"])
    for table in ("messages", "snapshots"):
        assert conn.execute(f"SELECT count(*) FROM {table} WHERE consultation_id = ?", (old,)).fetchone()[0] == 0


def test_expired_consultations_are_swept_while_running(tmp_path):
    app = make(tmp_path, RETENTION_SECONDS=3600, RETENTION_SWEEP_SECONDS=0)
    client = app.test_client()
    cid = client.post("/api/v1/consultations", json={"message": LOG}).get_json()["id"]
    _age(app.config["DATABASE"], cid, 7200)
    client.get("/healthz")
    assert client.get(f"/api/v1/consultations/{cid}").status_code == 404


def test_sweep_interval():
    sweep = security.RetentionSweep(started=1000.0)
    assert not sweep.due(1100.0, 600)
    assert sweep.due(1700.0, 600)
    assert not sweep.due(1701.0, 600)


# ------------------------------------------------------------------ errors never show the inside

def _leaks(body: str) -> list[str]:
    found = [m for m in ("Traceback", 'File "', str(ROOT), "site-packages", ".py") if m in body]
    return found


def test_an_internal_error_shows_no_trace_or_path(app, monkeypatch):
    consultant = app.extensions["oomdoctor.consultant"]

    def explode(*_args, **_kwargs):
        raise RuntimeError(f"boom in {ROOT}/oomdoctor/consultation.py line 42")

    monkeypatch.setattr(consultant, "take_turn", explode)
    client = app.test_client()
    for r in (client.post("/api/v1/consultations", json={"message": LOG}),
              client.post("/api/v1/diagnose", json={"message": LOG})):
        assert r.status_code == 500
        body = r.get_data(as_text=True)
        assert r.get_json()["error"] and not _leaks(body), body


def test_a_server_error_body_with_a_path_is_replaced(tmp_path):
    app = make(tmp_path)

    @app.get("/test-only/leak")
    def leak():
        return f'Traceback (most recent call last):\n  File "{ROOT}/x.py", line 1', 500

    r = app.test_client().get("/test-only/leak")
    assert r.status_code == 500 and not _leaks(r.get_data(as_text=True))


def test_a_database_gone_at_run_time_is_a_503_without_the_path(app, monkeypatch):
    from oomdoctor import storage

    def broken(*_args, **_kwargs):
        raise storage.StorageError(storage.explain(app.config["DATABASE"], sqlite3.OperationalError("disk I/O error")))

    monkeypatch.setattr(storage.Store, "get", broken)
    r = app.test_client().get("/api/v1/consultations/abc")
    assert r.status_code == 503
    assert app.config["DATABASE"] not in r.get_data(as_text=True)


# ------------------------------------------------------------------ redaction through the API

SECRET_LOG = LOG + """
export HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567
wandb login 0123456789abcdef0123456789abcdef01234567
contact: carol.secret@example.com
"""


def test_api_stores_and_echoes_only_redacted_text(app):
    client = app.test_client()
    r = client.post("/api/v1/consultations", json={"message": SECRET_LOG})
    assert r.status_code == 201
    reply = r.get_json()["reply"]
    assert "redacted:email=1,hf_token=1,user=1,wandb_key=1" in reply["notes"]
    cid = r.get_json()["id"]
    record = client.get(f"/api/v1/consultations/{cid}").get_data(as_text=True)
    for secret in ("hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "0123456789abcdef0123456789abcdef01234567",
                   "carol.secret@example.com"):
        assert secret not in record and secret not in r.get_data(as_text=True)
    assert "<redacted:hf_token>" in record
    one_shot = client.post("/api/v1/diagnose", json={"message": SECRET_LOG}).get_json()
    assert "redacted:email=1,hf_token=1,user=1,wandb_key=1" in one_shot["notes"]
