"""A full consultation over HTTP against a real gunicorn process with several workers, on each store."""
from pathlib import Path

import pytest
import requests

from conftest import LiveServer

LOG = (Path(__file__).parent / "fixtures" / "logs" / "cuda_oom_new.txt").read_text()

pytestmark = pytest.mark.server


@pytest.fixture
def live_server(tmp_path, database):
    server = LiveServer(tmp_path, database=database).start()
    yield server
    server.stop()


def test_consultation_over_http(live_server):
    url = live_server.url
    r = requests.post(f"{url}/api/v1/consultations", json={"message": LOG}, timeout=30)
    assert r.status_code == 201, live_server.output()
    cid = r.json()["id"]
    reply = r.json()["reply"]
    assert reply["status"] == "question" and reply["oom_kind"] == "gpu"
    # Chinese free-text answer carrying several facts.
    r = requests.post(f"{url}/api/v1/consultations/{cid}/messages",
                      json={"message": "模型是 Llama-3-8B，LoRA 微调，batch 4，序列长度 2048"}, timeout=30)
    reply = r.json()["reply"]
    while reply["status"] == "question":
        reply = requests.post(f"{url}/api/v1/consultations/{cid}/messages", json={"message": "跳过"}, timeout=30).json()["reply"]
    assert reply["lang"] == "zh"
    assert reply["oom_kind"] == "gpu"
    assert reply["estimate"]["breakdown"]["weights"] > 10
    assert reply["remedies"] and all(r["change"] for r in reply["remedies"])
    assert any(r["estimate_after_gib"] for r in reply["remedies"])


def test_restart_loses_nothing(tmp_path, database):
    server = LiveServer(tmp_path, database=database).start()
    try:
        cid = requests.post(f"{server.url}/api/v1/consultations", json={"message": LOG}, timeout=30).json()["id"]
    finally:
        server.stop()
    again = LiveServer(tmp_path, database=database).start()
    try:
        record = requests.get(f"{again.url}/api/v1/consultations/{cid}", timeout=30).json()
        assert record["pending_question"] == "ask_model"
        reply = requests.post(f"{again.url}/api/v1/consultations/{cid}/messages", json={"message": "llama-3-8b"},
                              timeout=30).json()["reply"]
        assert {f["name"]: f["value"] for f in reply["facts"]}["model.name"] == "llama-3-8b"
    finally:
        again.stop()


def test_one_log_format_for_gunicorn_access_and_the_app(tmp_path):
    """Every line carries time, level and logger; the app's INFO lines (a refused Slack request) appear."""
    import re

    import requests

    from conftest import LiveServer

    server = LiveServer(tmp_path, workers=1, env={"OOMDOCTOR_SLACK_SIGNING_SECRET": "test-secret"}).start()
    try:
        requests.get(server.url + "/healthz", timeout=10)
        refused = requests.post(server.url + "/slack/commands", data={"text": "hi"}, timeout=10)
        assert refused.status_code == 401
    finally:
        server.stop()
    lines = [line for line in server.output().splitlines() if line.strip()]
    stamp = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: ")
    assert lines and all(stamp.match(line) for line in lines), "\n".join(line for line in lines if not stamp.match(line))
    assert any(" INFO oomdoctor.channels.slack.verify: Slack request refused" in line for line in lines)
    assert any(" INFO gunicorn.access: " in line and '"GET /healthz HTTP/1.1" 200' in line for line in lines)
    assert any(" INFO gunicorn.error: Booting worker" in line for line in lines)
