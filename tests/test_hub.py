"""Any model a user names, through the real huggingface_hub client against a local server that answers the
way the Hub does (``HF_ENDPOINT``): ``/<repo>/resolve/<revision>/config.json`` with ``X-Repo-Commit`` and
``ETag`` headers, 401 ``GatedRepo`` without the right token, 401 ``RepoNotFound`` for a repo it does not have
(the Hub does not tell a missing repo from a private one), 404 ``EntryNotFound`` for a missing file.  No test
reaches the internet."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from oomdoctor.catalog import find_model_names, load_models
from oomdoctor.catalog import hub
from oomdoctor.catalog.hf_config import from_hf_config
from oomdoctor.catalog.models import catalog_config

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "hf_localtesttoken"


def _config(model_id: str) -> dict:
    """The config.json keys the catalog keeps for a model: served by the fake Hub as that model's config.json."""
    return dict(catalog_config(model_id))


class FakeHub:
    """A Hub stand-in: repos -> config dicts; some gated; one that answers too slowly."""

    def __init__(self) -> None:
        self.repos: dict[str, dict] = {}
        self.gated: set[str] = set()
        self.slow: set[str] = set()
        self.requests: list[tuple[str, str]] = []
        hub_self = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):          # keep pytest's output clean
                pass

            def _answer(self, body: bool) -> None:
                hub_self.requests.append((self.command, self.path))
                parts = self.path.split("?")[0].strip("/").split("/")
                if len(parts) < 5 or parts[2] != "resolve":
                    return self._error(401, "RepoNotFound")
                repo, filename = f"{parts[0]}/{parts[1]}", "/".join(parts[4:])
                if repo in hub_self.slow:
                    time.sleep(3)
                if repo not in hub_self.repos:
                    return self._error(401, "RepoNotFound")
                if repo in hub_self.gated and self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self._error(401, "GatedRepo")
                if filename != "config.json":
                    return self._error(404, "EntryNotFound")
                data = json.dumps(hub_self.repos[repo], indent=2).encode()
                commit = hashlib.sha1(repo.encode()).hexdigest()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
                self.send_header("X-Repo-Commit", commit)
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def _error(self, code: int, kind: str) -> None:
                msg = json.dumps({"error": kind}).encode()
                self.send_response(code)
                self.send_header("X-Error-Code", kind)
                self.send_header("X-Error-Message", kind)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(msg)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(msg)

            def do_HEAD(self):
                self._answer(body=False)

            def do_GET(self):
                self._answer(body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeHub":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    with FakeHub() as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("OOMDOCTOR_HUB_LOOKUP", "1")
        monkeypatch.setenv("OOMDOCTOR_HUB_CACHE", str(tmp_path / "hub-cache"))
        # Far above a local answer even on a loaded machine (a CLI subprocess once missed 1 s at load 13);
        # the slow-Hub test sets its own, below the stand-in's delay.
        monkeypatch.setenv("OOMDOCTOR_HUB_TIMEOUT", "15")
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
            monkeypatch.delenv(var, raising=False)
        hub.clear_cache()
        yield server
        hub.clear_cache()


QWEN = "qwen3-8b"


def test_a_fine_tune_under_a_new_name_resolves_through_its_own_config(fake_hub):
    fake_hub.repos["acme-lab/Qwen3-8B-Medical-SFT"] = _config(QWEN)
    found = hub.lookup("acme-lab/Qwen3-8B-Medical-SFT")
    assert found.source == "hub"
    assert found.detail.startswith("acme-lab/Qwen3-8B-Medical-SFT@")
    assert found.shape.param_count() == from_hf_config(_config(QWEN)).param_count()
    # of the repo's files, the client asked the local Hub for config.json only
    files = [path for _, path in fake_hub.requests if "/resolve/" in path]
    assert files and set(files) == {"/acme-lab/Qwen3-8B-Medical-SFT/resolve/main/config.json"}


def test_local_paths_and_cache_folders_name_a_hub_repo(fake_hub):
    fake_hub.repos["acme-lab/tiny-chat-7b"] = _config(QWEN)
    for name in ("/data/models/acme-lab/tiny-chat-7b", "~/.cache/huggingface/hub/models--acme-lab--tiny-chat-7b/"
                 "snapshots/0123456789abcdef0123456789abcdef01234567"):
        found = hub.lookup(name)
        assert found.source == "hub", name


def test_gated_repo_needs_hf_token(fake_hub, monkeypatch):
    fake_hub.repos["acme-lab/Gated-Model-8B"] = _config(QWEN)
    fake_hub.gated.add("acme-lab/Gated-Model-8B")
    found = hub.lookup("acme-lab/Gated-Model-8B")
    assert found.source == "name" and "HF_TOKEN" in found.note["en"] and "需要授权" in found.note["zh"]
    hub.clear_cache()
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert hub.lookup("acme-lab/Gated-Model-8B").source == "hub"


def test_offline_mode_reads_only_the_cache(fake_hub, monkeypatch):
    fake_hub.repos["acme-lab/Cached-9B"] = _config(QWEN)
    assert hub.lookup("acme-lab/Cached-9B").source == "hub"
    hub.clear_cache()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    before = len(fake_hub.requests)
    assert hub.lookup("acme-lab/Cached-9B").source == "hub"          # from the on-disk cache
    never = hub.lookup("acme-lab/Never-Seen-9B")
    assert never.source == "name" and "HF_HUB_OFFLINE" in never.note["en"]
    assert len(fake_hub.requests) == before


def test_switch_off_means_no_request(fake_hub, monkeypatch):
    monkeypatch.setenv("OOMDOCTOR_HUB_LOOKUP", "0")
    fake_hub.repos["acme-lab/Anything-13B"] = _config(QWEN)
    found = hub.lookup("acme-lab/Anything-13B")
    assert found.source == "name" and "OOMDOCTOR_HUB_LOOKUP" in found.note["en"]
    assert found.note["zh"] == "Hub 查询未开启（OOMDOCTOR_HUB_LOOKUP）"
    assert fake_hub.requests == []


def test_unknown_repo_and_slow_hub_fall_back(fake_hub, monkeypatch):
    monkeypatch.setenv("OOMDOCTOR_HUB_TIMEOUT", "1")      # the stand-in answers this repo after 3 s
    missing = hub.lookup("acme-lab/Does-Not-Exist-7B")
    assert missing.source == "name" and "no such repo" in missing.note["en"]
    fake_hub.repos["acme-lab/Slow-7B"] = _config(QWEN)
    fake_hub.slow.add("acme-lab/Slow-7B")
    slow = hub.lookup("acme-lab/Slow-7B")
    assert slow.source == "name" and "did not answer" in slow.note["en"]
    catalog = hub.lookup("Qwen/Qwen3-8B-but-missing")
    assert catalog is not None


def test_not_a_model_config(fake_hub):
    fake_hub.repos["acme-lab/Whisper-Fork-1b"] = {"model_type": "whisper", "d_model": 512}
    found = hub.lookup("acme-lab/Whisper-Fork-1b")
    assert found.source == "name" and "whisper" in found.note["en"]


def test_repo_ids_are_read_strictly():
    assert hub.repo_id_of("meta-llama/Llama-3.1-8B") == "meta-llama/Llama-3.1-8B"
    assert hub.repo_id_of("https://huggingface.co/Qwen/Qwen3-8B/tree/main") == "Qwen/Qwen3-8B"
    assert hub.repo_id_of("/ckpt/run/config.json") is None
    assert hub.repo_id_of("llama-3-8b") is None
    assert hub.repo_id_of("a b/c") is None and hub.repo_id_of("org/..") is None
    assert hub.repo_id_of("/mnt/ckpt/../acme/Model-7B") == "acme/Model-7B"     # a path's last two parts


def test_estimate_cli_reads_a_hub_model(fake_hub, tmp_path):
    fake_hub.repos["acme-lab/Qwen3-8B-Legal"] = _config(QWEN)
    env = {**__import__("os").environ}
    out = subprocess.run([sys.executable, "-m", "oomdoctor", "estimate", "--json", "--model", "acme-lab/Qwen3-8B-Legal",
                          "--method", "lora", "--gpu", "4090"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env=env)
    assert out.returncode == 0, out.stderr
    reply = json.loads(out.stdout)
    assert reply["estimate"]["total_params"] == from_hf_config(_config(QWEN)).param_count()
    said = [a["text"] for a in reply["assumptions"] if a["fact"] == "model.name"]
    assert said and "config.json on the Hub" in said[0] and "acme-lab/Qwen3-8B-Legal" in said[0]


def test_sentence_names_an_unknown_model():
    assert find_model_names("LoRA on openchat-3.6-8b, batch 4") == [("openchat-3.6-8b", "openchat-3.6-8b")]
    assert find_model_names("Qwen2.5-7B on a 4090") == []          # the catalog's
    assert find_model_names("an A100-80GB, x86_64, CUDA 12.4") == []


def test_consultation_estimates_an_unknown_unreachable_model_from_its_name(monkeypatch):
    from oomdoctor.consultation import default

    C = default()
    monkeypatch.delenv("OOMDOCTOR_HUB_LOOKUP", raising=False)
    reply = C.diagnose("fine-tuning openchat-3.6-8b with LoRA r 16, batch 2, seq 2048 on a 4090: "
                       "torch.OutOfMemoryError: CUDA out of memory")
    assert reply["estimate"] is not None
    said = [a["text"] for a in reply["assumptions"] if a["fact"] == "model.name"]
    assert said, reply["assumptions"]
    assert "openchat-3.6-8b" in said[0] and "8B" in said[0] and "paste" in said[0] and "config.json" in said[0]
    zh = C.diagnose("用 LoRA 微调 openchat-3.6-8b，4090，CUDA out of memory", lang="zh")
    assert any("config.json" in a["text"] and "粘贴" in a["text"] for a in zh["assumptions"] if a["fact"] == "model.name")


def test_every_catalog_config_reads_back_the_same_through_the_hub(fake_hub):
    """The Hub path and the catalog path read the same file the same way."""
    models = load_models()
    some = [m for m in models.values() if catalog_config(m.id) is not None]
    for m in some[::10]:
        fake_hub.repos[f"mirror/{m.id}"] = _config(m.id)
        assert hub.lookup(f"mirror/{m.id}").shape.param_count() == m.param_count(), m.id
