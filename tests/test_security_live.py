"""Against a real gunicorn: no secret from a pasted log reaches the database file, its WAL, a reply or the log."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import requests

from conftest import LiveServer

pytestmark = pytest.mark.server

LOG = (Path(__file__).parent / "fixtures" / "logs" / "cuda_oom_new.txt").read_text()
SECRETS = {
    "hf": "hf_LiveSecretAbCdEfGhIjKlMnOpQrStUv0123",
    "openai": "sk-proj-LiveSecret0123456789abcdefghijklmnopqrstuvwxyzAB",
    "anthropic": "sk-ant-api03-LiveSecret0123456789abcdefghijklmnopqrstuvwxyz",
    "aws": "AKIAJLIVESECRET01234",
    "github": "ghp_LiveSecret0123456789abcdefghijklmnopqr",
    "slack": "xoxb-111111111111-2222222222222-LiveSecretAbCdEfGhIjKl",
    "wandb": "feedfacecafebeef0123456789abcdef76543210",
    "password": "Live-P4ssw0rd-in-url",
    "email": "live.secret.person@example-lab.org",
    "user": "livesecretuser",
}
PASTED = f"""{LOG.replace('/home/user/', f"/home/{SECRETS['user']}/")}
export HF_TOKEN={SECRETS['hf']}
OPENAI_API_KEY={SECRETS['openai']}
ANTHROPIC_API_KEY={SECRETS['anthropic']}
aws_access_key_id={SECRETS['aws']}
git clone https://{SECRETS['github']}@github.com/me/repo
SLACK_BOT_TOKEN={SECRETS['slack']}
wandb login {SECRETS['wandb']}
DATABASE_URL=postgresql://trainer:{SECRETS['password']}@db:5432/runs
maintainer: {SECRETS['email']}
"""


def _grep(path: Path) -> list[str]:
    if not path.exists():
        return []
    data = path.read_bytes()
    return [name for name, secret in SECRETS.items() if secret.encode() in data]


def test_no_secret_in_database_wal_reply_or_log(tmp_path):
    server = LiveServer(tmp_path, workers=2, env={"OOMDOCTOR_LOG_LEVEL": "debug"}).start()
    replies = []
    try:
        url = server.url
        r = requests.post(f"{url}/api/v1/consultations", json={"message": PASTED}, timeout=60)
        assert r.status_code == 201
        replies.append(r.text)
        assert any(n.startswith("redacted:") and sum(int(kind.split("=")[1]) for kind in n[9:].split(",")) >= 10
                   for n in r.json()["reply"]["notes"])
        cid = r.json()["id"]
        replies.append(requests.post(f"{url}/api/v1/consultations/{cid}/messages", json={"message": PASTED},
                                     timeout=60).text)
        replies.append(requests.get(f"{url}/api/v1/consultations/{cid}", timeout=30).text)
        replies.append(requests.post(f"{url}/api/v1/diagnose", json={"message": PASTED}, timeout=60).text)
        # The web page's form, with its CSRF token.
        session = requests.Session()
        page = session.get(f"{url}/", timeout=30).text
        token = re.search(r'name="csrf_token" value="([^"]+)"', page)
        token = token.group(1) if token else session.cookies.get("oomdoctor_csrf")
        r = session.post(f"{url}/?lang=en", data={"message": PASTED, "csrf_token": token}, timeout=60)
        assert r.status_code == 200, r.text[:300]  # followed the 303 to the conversation
        replies.append(r.text)
        # Refused inputs must not echo or log the secret either.
        replies.append(requests.post(f"{url}/api/v1/diagnose", json={"message": PASTED + "\x00"}, timeout=30).text)
        replies.append(requests.post(f"{url}/api/v1/diagnose", json={"message": PASTED, "x": 1}, timeout=30).text)
        replies.append(requests.post(f"{url}/api/v1/diagnose", data=PASTED.encode() + b"\xff",
                                     headers={"Content-Type": "application/json"}, timeout=30).text)
        # While the server runs the turns sit in the WAL file: look there too.
        wal = Path(f"{server.database}-wal")
        assert wal.exists() and wal.stat().st_size > 0
        running = {str(p): _grep(p) for p in (server.database, wal)}
        assert running == {str(server.database): [], str(wal): []}
    finally:
        server.stop()
    leaked_in_replies = [name for name, secret in SECRETS.items() if any(secret in body for body in replies)]
    assert leaked_in_replies == []
    database = server.database
    for path in (database, Path(f"{database}-wal"), Path(f"{database}-shm"), server.log):
        assert _grep(path) == [], path
    assert server.log.stat().st_size > 0 and database.stat().st_size > 0
