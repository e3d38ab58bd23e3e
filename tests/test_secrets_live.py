"""Against a real gunicorn over HTTP: the secrets the issue named, and one of every class of the
corpus, absent from the replies, the web page, the SQLite file, its WAL (read while the server
runs) and the server's log."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import requests

from conftest import LiveServer
from test_secrets_corpus import CORPUS, leaks

pytestmark = pytest.mark.server

# What the attack on the running service found leaking (issue #11), then the first entry of every class.
NAMED = ["gcp-service-account-json", "wandb-login-call-dq", "wandb-login-call-sq", "wandb-environ-dq",
         "wandb-environ-sq", "netrc-lines", "azure-storage-connection-string", "azure-sas-url",
         "json-camel-client-secret", "json-camel-access-token", "json-camel-api-key", "header-token-scheme",
         "stripe-live", "hf-short-python", "env-password-spaces"]
SUBSET = NAMED + [next(e["id"] for e in CORPUS if e["class"] == c and e["id"] not in NAMED)
                  for c in dict.fromkeys(e["class"] for e in CORPUS)]
PASTED = "\n\n".join(e["text"] for e in CORPUS if e["id"] in SUBSET)


def test_named_secrets_stay_out_of_a_live_server(tmp_path):
    assert len(set(SUBSET)) >= 20
    server = LiveServer(tmp_path, workers=2, env={"OOMDOCTOR_LOG_LEVEL": "debug"}).start()
    shown = []
    try:
        url = server.url
        r = requests.post(f"{url}/api/v1/consultations", json={"message": PASTED}, timeout=60)
        assert r.status_code == 201, r.text[:300]
        shown.append(r.text)
        assert r.json()["reply"]["notes"][0].startswith("redacted:")
        cid = r.json()["id"]
        shown.append(requests.get(f"{url}/api/v1/consultations/{cid}", timeout=30).text)
        shown.append(requests.post(f"{url}/api/v1/diagnose", json={"message": PASTED}, timeout=60).text)
        shown.append(requests.post(f"{url}/api/v1/estimate", timeout=30, json={
            "model": ["llama-3-8b", "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"],
            "config": {"clientSecret": "Qb2YLKquXVnfHKMLFmxYRGop1UJD"}}).text)
        session = requests.Session()
        token = re.search(r'name="csrf_token" value="([^"]+)"', session.get(f"{url}/", timeout=30).text).group(1)
        r = session.post(f"{url}/?lang=en", data={"message": PASTED, "csrf_token": token}, timeout=60)
        assert r.status_code == 200 and 'class="' in r.text  # followed the 303 to the consultation's page
        shown.append(r.text)
        wal = Path(f"{server.database}-wal")
        assert wal.exists() and wal.stat().st_size > 0
        running = {"database": leaks(server.database.read_bytes()), "WAL": leaks(wal.read_bytes())}
        assert running == {"database": [], "WAL": []}
    finally:
        server.stop()
    assert leaks(*shown) == []
    stopped = [Path(f"{server.database}{suffix}") for suffix in ("", "-wal", "-shm")]
    assert {str(p): leaks(p.read_bytes()) for p in stopped if p.exists()} == {str(p): [] for p in stopped if p.exists()}
    assert leaks(server.log.read_bytes()) == []
    assert b"<redacted:" in server.database.read_bytes() + (stopped[1].read_bytes() if stopped[1].exists() else b"")
