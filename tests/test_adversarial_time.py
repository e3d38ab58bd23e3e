"""A request's work is bounded in time, against a real gunicorn: the app answers 422 once its
budget (OOMDOCTOR_WORK_SECONDS) is spent, and past gunicorn's timeout the worker's watchdog
ends the request (gunicorn's own timeout never ends a stuck request thread of a gthread worker)."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import requests

from conftest import ROOT, LiveServer

pytestmark = pytest.mark.server


def training_log(size: int) -> str:
    """Real log lines from the corpus, repeated to `size` bytes, an OOM traceback last."""
    lines = "".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "tests" / "corpus").glob("*.log")))
    traceback = (ROOT / "tests" / "fixtures" / "logs" / "cuda_oom_new.txt").read_text(encoding="utf-8")
    body = lines * (size // len(lines.encode()) + 1)
    return body.encode()[: max(0, size - len(traceback.encode()))].decode("utf-8", "ignore") + traceback


def test_work_past_its_budget_is_answered_422_and_nothing_is_stored(tmp_path):
    server = LiveServer(tmp_path, workers=1, env={"OOMDOCTOR_WORK_SECONDS": "0.2",
                                                  "OOMDOCTOR_RATE_LIMIT_PER_MINUTE": "0"}).start()
    try:
        log = training_log(3 * 2**20)
        r = requests.post(server.url + "/api/v1/consultations", json={"message": log}, timeout=120)
        assert r.status_code == 422 and "0.2 s" in r.json()["error"]
        assert requests.post(server.url + "/api/v1/diagnose", json={"message": log[-4000:]}, timeout=60).status_code == 200
        conn = sqlite3.connect(server.database)
        assert conn.execute("SELECT count(*) FROM consultations").fetchone()[0] == 0
        conn.close()
    finally:
        server.stop()
    assert "Traceback" not in server.output()


def test_a_request_past_the_timeout_is_ended_with_its_worker(tmp_path):
    # The budget is set out of the way, so that only the watchdog can end the request.
    server = LiveServer(tmp_path, workers=1, env={"OOMDOCTOR_TIMEOUT": "2", "OOMDOCTOR_WORK_SECONDS": "1000",
                                                  "OOMDOCTOR_RATE_LIMIT_PER_MINUTE": "0"}).start()
    try:
        log = training_log(14 * 2**20)   # several seconds of reading on any machine
        with pytest.raises(requests.ConnectionError):
            requests.post(server.url + "/api/v1/diagnose", json={"message": log}, timeout=120)
        # gunicorn starts another worker, which answers.
        assert requests.get(server.url + "/healthz", timeout=30).status_code == 200
        output = Path(server.log).read_text(errors="replace")
        assert "past the 2 s timeout: ending worker" in output
        assert output.count("Booting worker") == 2
    finally:
        server.stop()
