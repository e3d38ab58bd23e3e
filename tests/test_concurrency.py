"""Many clients on many consultations across several gunicorn workers, a worker killed, the server
restarted; each on SQLite and on PostgreSQL (the `database` fixture).

Every stored reply is checked by replaying the consultation's transcript through
the consultant in this process (`take_turn` is a pure function of state and
message): a lost, duplicated, reordered or crossed turn would change a reply.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import requests

from conftest import LiveServer
from oomdoctor.consultation import State, default
from oomdoctor.redaction import redact

pytestmark = pytest.mark.server

LOG = (Path(__file__).parent / "fixtures" / "logs" / "cuda_oom_new.txt").read_text()
ANSWERS = ["llama3 8b lora", "seq len 2048", "batch size 4", "skip", "A100 40G", "per_device_train_batch_size=2",
           "gradient checkpointing on", "跳过"]
CLIENTS = 8
TURNS = 6  # per consultation, the first included


# Real log lines that make a turn take a while, so that a kill finds requests in flight.
PADDING = "".join(p.read_text(encoding="utf-8") for p in sorted((Path(__file__).parent / "corpus").glob("*.log")))[:80_000]


def message(client: int, turn: int, pad: bool = False) -> str:
    """What a client sends, as the service stores it (redacted: the log names a home folder)."""
    tag = f"[client {client} turn {turn}]"
    text = f"{LOG}\n{tag}" if turn == 0 else f"{ANSWERS[(client + turn) % len(ANSWERS)]} {tag}"
    return redact(f"{PADDING}\n{text}" if pad else text).text


def children(pid: int) -> list[int]:
    """The worker processes of a gunicorn master."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def wait_for(condition, deadline: float = 30.0) -> None:
    end = time.monotonic() + deadline
    while not condition() and time.monotonic() < end:
        time.sleep(0.01)


class Client:
    """One user: a consultation, its messages sent one after another, the answers kept."""

    def __init__(self, url: str, number: int, pad: bool = False) -> None:
        self.url, self.number, self.pad = url, number, pad
        self.cid: str | None = None
        self.acknowledged: list[str] = []  # messages whose reply came back
        self.unknown: list[str] = []  # messages whose request failed: stored or not, nobody knows

    def send(self, turn: int) -> None:
        text = message(self.number, turn, self.pad)
        try:
            if self.cid is None:
                r = requests.post(f"{self.url}/api/v1/consultations", json={"message": text}, timeout=60)
                if r.status_code == 201:
                    self.cid = r.json()["id"]
            else:
                r = requests.post(f"{self.url}/api/v1/consultations/{self.cid}/messages", json={"message": text},
                                  timeout=60)
        except requests.RequestException:
            self.unknown.append(text)
            return
        assert r.status_code in (200, 201), r.text[:300]
        self.acknowledged.append(text)

    def run(self, turns: range, pause: float = 0.0) -> None:
        for turn in turns:
            self.send(turn)
            time.sleep(pause)


# Turns already computed here, by the messages that led to them: (the state after them, as stored, and the
# reply). `take_turn` is pure, so a consultation checked again (after a restart, with one more turn) computes
# only its new turns.
_REPLAYED: dict[tuple[str, ...], tuple[str, str]] = {}


def replay(transcript: list[dict]) -> list[dict]:
    """The replies the transcript's messages should have had, computed here in order."""
    consultant, state, replies, messages = default(), json.dumps(State().to_dict()), [], ()
    for entry in transcript:
        messages += (entry["message"],)
        if messages not in _REPLAYED:
            after, reply = consultant.take_turn(State.from_dict(json.loads(state)), entry["message"])
            _REPLAYED[messages] = (json.dumps(after.to_dict()), json.dumps(reply))
        state, reply = _REPLAYED[messages]
        replies.append(json.loads(reply))
    return replies


def check(url: str, clients: list[Client]) -> dict[str, int]:
    """Counts of what went wrong across all consultations (all zero when nothing did)."""
    counts = Counter(turns=0, lost=0, duplicated=0, misordered=0, crosstalk=0, wrong_reply=0)
    for client in clients:
        if client.cid is None:
            continue
        record = requests.get(f"{url}/api/v1/consultations/{client.cid}", timeout=30).json()
        transcript = record["transcript"]
        texts = [t["message"] for t in transcript]
        counts["turns"] += len(texts)
        counts["misordered"] += int([t["seq"] for t in transcript] != list(range(1, len(transcript) + 1)))
        counts["crosstalk"] += sum(f"[client {client.number} " not in t for t in texts)
        counts["lost"] += sum(t not in texts for t in client.acknowledged)
        counts["duplicated"] += sum(n - 1 for n in Counter(texts).values() if n > 1)
        sent = client.acknowledged + client.unknown
        order = [t for t in sorted(sent, key=lambda t: int(t.rsplit("turn ", 1)[1].rstrip("]"))) if t in texts]
        counts["misordered"] += int(texts != order)
        counts["wrong_reply"] += sum(t["reply"] != r for t, r in zip(transcript, replay(transcript)))
    return dict(counts)


def test_many_clients_many_consultations_four_workers(tmp_path, database):
    server = LiveServer(tmp_path, workers=4, env={"OOMDOCTOR_RATE_LIMIT_PER_MINUTE": "0"}, database=database).start()
    try:
        clients = [Client(server.url, n) for n in range(CLIENTS)]
        threads = [threading.Thread(target=c.run, args=(range(TURNS),)) for c in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        counts = check(server.url, clients)
        print(f"\nconcurrency: {CLIENTS} clients x {TURNS} turns, 4 workers: {counts}")
        assert all(c.cid for c in clients) and not any(c.unknown for c in clients)
        assert counts == {"turns": CLIENTS * TURNS, "lost": 0, "duplicated": 0, "misordered": 0, "crosstalk": 0,
                          "wrong_reply": 0}, server.output()
        # The first reply of each is about that client's own log.
        for client in clients:
            first = requests.get(f"{server.url}/api/v1/consultations/{client.cid}", timeout=30).json()["transcript"][0]
            assert first["reply"]["oom_kind"] == "gpu"
            assert any(f["name"] == "oom.tried_gib" for f in first["reply"]["facts"])
    finally:
        server.stop()


def test_many_clients_on_one_consultation(tmp_path, database):
    server = LiveServer(tmp_path, workers=4, env={"OOMDOCTOR_RATE_LIMIT_PER_MINUTE": "0"}, database=database).start()
    try:
        cid = requests.post(f"{server.url}/api/v1/consultations", json={"message": message(99, 0)},
                            timeout=60).json()["id"]
        clients = [Client(server.url, n) for n in range(6)]
        for c in clients:
            c.cid = cid
        threads = [threading.Thread(target=c.run, args=(range(1, 5),)) for c in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        transcript = requests.get(f"{server.url}/api/v1/consultations/{cid}", timeout=30).json()["transcript"]
        texts = [t["message"] for t in transcript]
        assert [t["seq"] for t in transcript] == list(range(1, 26))
        assert Counter(texts[1:]) == Counter(message(c.number, turn) for c in clients for turn in range(1, 5))
        for c in clients:  # each client's own messages in the order it sent them
            assert [t for t in texts if f"[client {c.number} " in t] == [message(c.number, k) for k in range(1, 5)]
        assert [t["reply"] for t in transcript] == replay(transcript)
    finally:
        server.stop()


def test_worker_killed_mid_run_then_server_restarted(tmp_path, database):
    server = LiveServer(tmp_path, workers=3, env={"OOMDOCTOR_RATE_LIMIT_PER_MINUTE": "0"}, database=database).start()
    clients = [Client(server.url, n, pad=True) for n in range(6)]
    try:
        threads = [threading.Thread(target=c.run, args=(range(TURNS),)) for c in clients]
        for t in threads:
            t.start()
        wait_for(lambda: sum(len(c.acknowledged) for c in clients) >= len(clients) * TURNS // 3)
        victim = children(server.proc.pid)[0]
        os.kill(victim, signal.SIGKILL)
        for t in threads:
            t.join()
        # gunicorn replaces the worker; the service goes on.
        deadline = time.monotonic() + 20
        while len(children(server.proc.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert victim not in children(server.proc.pid)
        counts = check(server.url, clients)
        unknown = sum(len(c.unknown) for c in clients)
        print(f"\nworker killed: {counts}, requests cut by the kill: {unknown}")
        assert counts["lost"] == counts["duplicated"] == counts["misordered"] == 0
        assert counts["crosstalk"] == counts["wrong_reply"] == 0
        before = {c.cid: requests.get(f"{server.url}/api/v1/consultations/{c.cid}", timeout=30).json()
                  for c in clients if c.cid}
    finally:
        server.stop()

    again = LiveServer(tmp_path, workers=3, env={"OOMDOCTOR_RATE_LIMIT_PER_MINUTE": "0"}, database=database).start()
    try:
        for cid, record in before.items():
            now = requests.get(f"{again.url}/api/v1/consultations/{cid}", timeout=30).json()
            assert now["transcript"] == record["transcript"]
            assert now["pending_question"] == record["pending_question"]
            r = requests.post(f"{again.url}/api/v1/consultations/{cid}/messages", json={"message": "skip"}, timeout=60)
            assert r.status_code == 200
            after = requests.get(f"{again.url}/api/v1/consultations/{cid}", timeout=30).json()["transcript"]
            assert after[-1]["seq"] == len(record["transcript"]) + 1
            assert [t["reply"] for t in after] == replay(after)
    finally:
        again.stop()


def test_abrupt_kill_of_the_whole_server_loses_no_acknowledged_turn(tmp_path, database):
    server = LiveServer(tmp_path, workers=3, env={"OOMDOCTOR_RATE_LIMIT_PER_MINUTE": "0"}, database=database).start()
    clients = [Client(server.url, n) for n in range(6)]
    threads = [threading.Thread(target=c.run, args=(range(TURNS), 0.05)) for c in clients]
    for t in threads:
        t.start()
    wait_for(lambda: sum(len(c.acknowledged) for c in clients) >= len(clients) * TURNS // 3)
    for pid in children(server.proc.pid) + [server.proc.pid]:
        os.kill(pid, signal.SIGKILL)
    for t in threads:
        t.join()
    server.stop()
    if "://" not in database:  # the SQLite file was written by the killed processes themselves
        conn = sqlite3.connect(database)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()
    again = LiveServer(tmp_path, workers=2, env={"OOMDOCTOR_RATE_LIMIT_PER_MINUTE": "0"}, database=database).start()
    try:
        counts = check(again.url, clients)
        acknowledged = sum(len(c.acknowledged) for c in clients)
        cut = sum(len(c.unknown) for c in clients)
        print(f"\nwhole server killed: {counts}, acknowledged before the kill: {acknowledged}, cut: {cut}")
        assert acknowledged > 0 and cut > 0
        assert counts["lost"] == counts["duplicated"] == counts["misordered"] == 0
        assert counts["crosstalk"] == counts["wrong_reply"] == 0
    finally:
        again.stop()
