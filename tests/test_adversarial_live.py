"""Hostile requests end to end through gunicorn: a clear 4xx each, no 500, no hang, no dead worker."""
from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import requests

from conftest import LiveServer

pytestmark = pytest.mark.server

LOG = (Path(__file__).parent / "fixtures" / "logs" / "cuda_oom_new.txt").read_text()
LIMIT = 1024 * 1024  # OOMDOCTOR_MAX_MESSAGE_BYTES for this server; the body limit is 64 KiB more


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    live = LiveServer(tmp_path_factory.mktemp("adversarial"), workers=2,
                      env={"OOMDOCTOR_MAX_MESSAGE_BYTES": str(LIMIT), "OOMDOCTOR_RATE_LIMIT_PER_MINUTE": "0"}).start()
    yield live
    live.stop()


def post(server, body: bytes, path: str = "/api/v1/diagnose", content_type: str = "application/json"):
    return requests.post(server.url + path, data=body, headers={"Content-Type": content_type}, timeout=120)


def test_a_body_over_the_request_limit_gets_413_saying_the_limit(server):
    body = json.dumps({"message": "x" * (3 * LIMIT)}).encode()
    r = post(server, body)
    assert r.status_code == 413
    assert str(LIMIT) in r.json()["error"]


def test_a_message_over_the_message_limit_gets_413(server):
    body = json.dumps({"message": "é" * (LIMIT // 2 + 1)}, ensure_ascii=False).encode()
    r = post(server, body)  # over the limit in bytes, under it in characters
    assert r.status_code == 413
    assert f"the limit is {LIMIT} bytes" in r.json()["error"]


@pytest.mark.parametrize("body, words", [
    (b'{"message": "\xff\xfe CUDA out of memory"}', "UTF-8"),
    (b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 64, "UTF-8"),
    (b'{"message": ' + b"[" * 5000 + b"]" * 5000 + b"}", "deeper"),
    (b'{"message": "a\\u0000b"}', "NUL"),
    (b"{bad json", "not valid JSON"),
])
def test_raw_hostile_bodies(server, body, words):
    r = post(server, body)
    assert r.status_code == 400 and words in r.json()["error"]


def test_wrong_content_type(server):
    assert post(server, LOG.encode(), content_type="text/plain").status_code == 415


def test_an_enormous_single_line_is_read(server):
    line = ("x" * 4096 + " ") * ((LIMIT - 8192) // 4097) + LOG.replace("\n", " ")
    r = post(server, json.dumps({"message": line}).encode())
    assert r.status_code == 200
    assert r.json()["oom_kind"] == "gpu"


def _raw(server, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(request)
        return sock.recv(4096)


def test_oversized_headers_and_request_lines_are_refused_by_gunicorn(server):
    head = _raw(server, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n")
    assert head.split(b" ", 2)[1] in (b"400", b"431")
    head = _raw(server, b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert head.split(b" ", 2)[1] in (b"400", b"414")
    head = _raw(server, b"GARBAGE\r\n\r\n")
    assert head.split(b" ", 2)[1] == b"400"


def test_a_chunked_body_over_the_limit_is_413_not_invalid_json(server):
    def chunks():
        yield b'{"message": "'
        for _ in range(3 * 16):
            yield b"x" * 65536
        yield b'"}'

    r = requests.post(server.url + "/api/v1/diagnose", data=chunks(), headers={"Content-Type": "application/json"},
                      timeout=120)
    assert r.status_code == 413 and str(LIMIT) in r.json()["error"]
    # A chunked body within the limit is read whole.
    small = iter([json.dumps({"message": LOG}).encode()])
    r = requests.post(server.url + "/api/v1/diagnose", data=small, headers={"Content-Type": "application/json"},
                      timeout=120)
    assert r.status_code == 200 and r.json()["oom_kind"] == "gpu"


def _page_session(server):
    import re

    session = requests.Session()
    token = re.search(r'name="csrf_token" value="([^"]+)"', session.get(server.url + "/", timeout=30).text).group(1)
    return session, token


def test_a_multipart_flood_is_a_bad_form_not_too_large(server):
    session, token = _page_session(server)
    files = [(f"f{i}", ("a.txt", b"x")) for i in range(2000)]
    r = session.post(server.url + "/?lang=en", data={"csrf_token": token, "message": LOG}, files=files,
                     headers={"Accept": "application/json"}, timeout=60)
    assert r.status_code == 400 and "parts" in r.json()["error"] and "bytes" not in r.json()["error"]


def test_the_page_script_may_send_a_message_as_long_as_the_limit(server):
    # page.js sends FormData (multipart): Flask's own 500 kB limit on a form field refused this as "too large".
    session, token = _page_session(server)
    text = LOG + "\n" + "step 1 loss 2.0\n" * ((LIMIT - 70_000) // 16)
    r = session.post(server.url + "/?lang=en", files={"message": (None, text), "csrf_token": (None, token)},
                     headers={"Accept": "application/json"}, timeout=120)
    assert r.status_code == 200, r.text[:300]
    assert r.json()["status"] in ("question", "report")


def test_the_access_log_holds_no_consultation_id(server):
    cid = requests.post(server.url + "/api/v1/consultations", json={"message": LOG}, timeout=60).json()["id"]
    requests.get(f"{server.url}/api/v1/consultations/{cid}?x=1", timeout=30)
    requests.get(f"{server.url}/c/{cid}", timeout=30)
    lines = '"GET /c/<id> HTTP/1.1" 404', '"GET /api/v1/consultations/<id> HTTP/1.1" 200'
    log = server.log_once_it_holds(*lines)
    assert cid not in log
    assert all(line in log for line in lines)


def test_the_server_is_whole_afterwards(server):
    """Runs last in this module: every worker alive, no timeout, no unhandled error in the log."""
    assert requests.get(server.url + "/healthz", timeout=10).status_code == 200
    log = server.output() if len(server.log.read_bytes()) < 5000 else server.log.read_text(errors="replace")
    assert "WORKER TIMEOUT" not in log
    assert "Traceback" not in log and "unhandled error" not in log
    assert log.count("Booting worker") == 2
