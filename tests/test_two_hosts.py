"""Two gunicorn instances on different ports sharing one PostgreSQL: the scaled shape.

A consultation started on one is continued on the other; 48 clients spread over both lose,
duplicate, misorder and cross nothing (every stored reply checked by replaying the
transcript); one instance killed mid-turn loses nothing acknowledged; the rate limit is
one count for both; a Slack reply whose instance died is posted by the other.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import signal
import socket
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlencode

import pytest
import requests

from conftest import LiveServer
from test_concurrency import LOG, Client, check, children, message, replay, wait_for
from test_slack import SECRET, Hook, TRACEBACK

pytestmark = pytest.mark.server

CLIENTS = 48
TURNS = 6


class Roaming(Client):
    """A client whose every turn goes to the next instance, as a load balancer without stickiness would send it."""

    def __init__(self, urls: list[str], number: int, pad: bool = False) -> None:
        super().__init__(urls[number % len(urls)], number, pad)
        self.urls = urls
        self.cut = 0  # requests an instance had accepted and never answered

    def send(self, turn: int) -> None:
        self.url = self.urls[(self.number + turn) % len(self.urls)]
        unknown = len(self.unknown)
        try:
            # Refused outright (the instance was gone before the request) or cut (it died holding it)?
            with socket.create_connection(("127.0.0.1", int(self.url.rsplit(":", 1)[1])), timeout=5):
                pass
        except OSError:
            self.unknown.append(message(self.number, turn, self.pad))
            return
        super().send(turn)
        self.cut += len(self.unknown) - unknown


def pair(tmp_path, url: str, env: dict[str, str] | None = None, workers: int = 2) -> list[LiveServer]:
    """Two instances on one database, started at the same moment (both apply the migrations)."""
    servers = [LiveServer(tmp_path, workers=workers, env=env, database=url) for _ in range(2)]
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda s: s.start(deadline=60), servers))
    return servers


def stop(servers: list[LiveServer]) -> None:
    for server in servers:
        server.stop()


def test_a_consultation_started_on_one_is_continued_on_the_other(tmp_path, postgres):
    a, b = servers = pair(tmp_path, postgres.database())
    try:
        r = requests.post(f"{a.url}/api/v1/consultations", json={"message": LOG}, timeout=30)
        assert r.status_code == 201 and r.json()["reply"]["questions"][0]["id"] == "ask_model"
        cid = r.json()["id"]
        reply = requests.post(f"{b.url}/api/v1/consultations/{cid}/messages",
                              json={"message": "Llama-3-8B, LoRA, batch 4, seq len 2048"}, timeout=30).json()["reply"]
        assert {f["name"]: f["value"] for f in reply["facts"]}["model.name"] == "llama-3-8b"
        assert {f["name"] for f in reply["facts"]} >= {"oom.tried_gib"}  # what A read is known on B
        on_a = requests.get(f"{a.url}/api/v1/consultations/{cid}", timeout=30).json()
        assert [t["seq"] for t in on_a["transcript"]] == [1, 2]
        assert [t["reply"] for t in on_a["transcript"]] == replay(on_a["transcript"])
        assert requests.delete(f"{b.url}/api/v1/consultations/{cid}", timeout=30).status_code == 204
        assert requests.get(f"{a.url}/api/v1/consultations/{cid}", timeout=30).status_code == 404
    finally:
        stop(servers)


def test_48_clients_spread_over_both(tmp_path, postgres):
    servers = pair(tmp_path, postgres.database(), env={"OOMDOCTOR_RATE_LIMIT_PER_MINUTE": "0"})
    try:
        urls = [s.url for s in servers]
        clients = [Roaming(urls, n) for n in range(CLIENTS)]
        threads = [threading.Thread(target=c.run, args=(range(TURNS),)) for c in clients]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.monotonic() - started
        counts = check(urls[1], clients)
        print(f"\ntwo instances, {CLIENTS} clients x {TURNS} turns alternating between them: {counts} in {took:.1f} s")
        assert all(c.cid for c in clients) and not any(c.unknown for c in clients)
        assert counts == {"turns": CLIENTS * TURNS, "lost": 0, "duplicated": 0, "misordered": 0, "crosstalk": 0,
                          "wrong_reply": 0}, [s.output() for s in servers]
    finally:
        stop(servers)


def test_one_instance_killed_mid_turn_loses_nothing_acknowledged(tmp_path, postgres):
    a, b = servers = pair(tmp_path, postgres.database(), env={"OOMDOCTOR_RATE_LIMIT_PER_MINUTE": "0"})
    urls = [a.url, b.url]
    # Long turns (about 80 KiB of real log each), so that the kill finds requests in flight.
    clients = [Roaming(urls, n, pad=True) for n in range(12)]
    try:
        threads = [threading.Thread(target=c.run, args=(range(TURNS),)) for c in clients]
        for t in threads:
            t.start()
        wait_for(lambda: sum(len(c.acknowledged) for c in clients) >= len(clients) * TURNS // 3)
        for pid in children(a.proc.pid) + [a.proc.pid]:
            os.kill(pid, signal.SIGKILL)
        for t in threads:
            t.join()
        counts = check(b.url, clients)
        acknowledged = sum(len(c.acknowledged) for c in clients)
        cut = sum(c.cut for c in clients)
        refused = sum(len(c.unknown) for c in clients) - cut
        print(f"\none of two instances killed: {counts}, acknowledged: {acknowledged}, cut in flight by the kill: "
              f"{cut}, refused after it: {refused}")
        assert cut > 0  # the kill found turns in flight
        assert counts["turns"] >= acknowledged
        assert counts["lost"] == counts["duplicated"] == counts["misordered"] == 0
        assert counts["crosstalk"] == counts["wrong_reply"] == 0
        # The survivor goes on with every consultation, whichever instance held it.
        for client in clients:
            if client.cid:
                r = requests.post(f"{b.url}/api/v1/consultations/{client.cid}/messages", json={"message": "skip"},
                                  timeout=60)
                assert r.status_code == 200
                transcript = requests.get(f"{b.url}/api/v1/consultations/{client.cid}", timeout=30).json()["transcript"]
                assert [t["seq"] for t in transcript] == list(range(1, len(transcript) + 1))
    finally:
        stop(servers)


def test_the_rate_limit_is_one_count_for_both(tmp_path, postgres):
    limit = 12
    servers = pair(tmp_path, postgres.database(), env={"OOMDOCTOR_RATE_LIMIT_PER_MINUTE": str(limit)})
    try:
        if time.time() % 60 > 50:  # the count is per minute: start in a fresh one rather than straddle two
            time.sleep(61 - time.time() % 60)
        statuses = [requests.get(f"{servers[i % 2].url}/api/v1/consultations/nope", timeout=30).status_code
                    for i in range(2 * limit)]
        assert statuses == [404] * limit + [429] * limit
        # Each instance alone would have let `limit` through: together they let `limit` through in all.
    finally:
        stop(servers)


def _signed(body: bytes) -> dict[str, str]:
    now = str(int(time.time()))
    signature = "v0=" + hmac.new(SECRET.encode(), b"v0:" + now.encode() + b":" + body, hashlib.sha256).hexdigest()
    return {"Content-Type": "application/x-www-form-urlencoded", "X-Slack-Request-Timestamp": now,
            "X-Slack-Signature": signature}


def test_a_slack_reply_whose_instance_died_is_posted_by_the_other(tmp_path, postgres):
    hook = Hook()
    url = postgres.database()
    env = {"OOMDOCTOR_SLACK_SIGNING_SECRET": SECRET, "OOMDOCTOR_SLACK_RESPONSE_URL_PREFIXES": hook.base,
           "OOMDOCTOR_SLACK_ACK_SECONDS": "0", "OOMDOCTOR_SLACK_OUTBOX_LEASE_SECONDS": "3",
           "OOMDOCTOR_SLACK_OUTBOX_POLL_SECONDS": "0.5", "OOMDOCTOR_SLACK_MAX_MESSAGE_BYTES": str(4 * 2**20)}
    a, b = servers = pair(tmp_path, url, env=env, workers=1)
    try:
        requests.get(f"{b.url}/healthz", timeout=10)  # B's worker has served a request: it drains
        # A paste of about 2 MiB: its turn takes A over a second, and A dies within it.
        text = ("".join(f"step {i}: loss=2.{i % 97:02d} lr=2e-5\n" for i in range(70_000)) + TRACEBACK)
        response_url = hook.url()
        body = urlencode({"team_id": "T1", "channel_id": "C1", "user_id": "U1", "command": "/oom", "text": text,
                          "response_url": response_url}).encode()
        request = urllib.request.Request(a.url + "/slack/commands", data=body, method="POST", headers=_signed(body))
        with urllib.request.urlopen(request, timeout=30) as resp:
            ack = json.loads(resp.read())
        assert "Working on it" in json.dumps(ack)
        for pid in children(a.proc.pid) + [a.proc.pid]:
            os.kill(pid, signal.SIGKILL)
        late = hook.wait(timeout=60)
        assert late["response_type"] == "ephemeral" and any(blk["type"] == "actions" for blk in late["blocks"])
        from oomdoctor.storage import Store

        store = Store(url, migrate=False)
        with store.reading() as conn:
            [(state, attempts)] = conn.execute("SELECT state, attempts FROM outbox").fetchall()
            [(turns,)] = conn.execute("SELECT turns FROM consultations").fetchall()
        print(f"\nSlack reply after its instance died: outbox entry {state} after {attempts} attempts, {turns} turn")
        assert state == "done" and attempts == 2  # taken over by B, not posted by A before it died
        assert turns == 1
        time.sleep(2)
        assert hook.posts.empty()  # posted once
    finally:
        stop(servers)
        hook.close()
