"""Answering Slack in time: reply within the 3-second window, or acknowledge and post later.

Work that may answer late goes through the outbox, a table in the database: it is
recorded (a named job and its arguments) before it starts, claimed by the worker that
started it for a lease, and its message is kept once computed. If that worker is
recycled or its host lost, the lease lapses and any other worker takes the entry over:
it redoes the work (a turn carries the entry's id as its request id, so a turn already
stored is not stored again) or posts the kept message. Every worker drains lapsed
entries in a background thread, started by its first request.

Slack allows at most five posts to one response_url within 30 minutes; the count is
kept in the database, so every worker and host sees the same count.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Callable, NamedTuple

from flask import Flask, current_app

log = logging.getLogger(__name__)

TIMEOUT_SECONDS = 5.0
MAX_POSTS = 5
WINDOW_SECONDS = 30 * 60
# How long a request waits for the turn before it acknowledges instead (Slack gives up at 3 s).
ACK_SECONDS = 2.0
# Where a response_url may point; tests add their local server through the app's config.
SLACK_HOSTS = ("https://hooks.slack.com/", "https://hooks.slack-gov.com/")
# How long the worker that starts an entry holds it: longer than a turn may run (gunicorn's
# timeout, 60 s) so that a slow turn is not done twice; a lost worker's entry waits this long.
LEASE_SECONDS = 90.0
# How often each worker looks for lapsed entries.
POLL_SECONDS = 2.0
# Tries of one entry (its first run included) before the person is told it failed.
MAX_ATTEMPTS = 3


class Job(NamedTuple):
    work: Callable[[dict, str], dict]  # (arguments, request id) -> the Slack message
    failed: Callable[[dict], dict]  # (arguments) -> the message saying it failed


JOBS: dict[str, Job] = {}


def job(kind: str, failed: Callable[[dict], dict]) -> Callable:
    """Register work under a name, so that any worker can redo it from the outbox's record."""
    def register(work: Callable[[dict, str], dict]) -> Callable[[dict, str], dict]:
        JOBS[kind] = Job(work, failed)
        return work
    return register


# ---------------------------------------------------------------- posting to a response_url

def _allowed(url: str, prefixes: tuple[str, ...]) -> bool:
    return any(url.startswith(prefix) for prefix in prefixes)


def _send(url: str, message: dict[str, Any], prefixes: tuple[str, ...], timeout: float) -> str:
    """"sent"; "refused" (never to be tried again); or "failed" (worth another try)."""
    from ...web.context import store

    if not _allowed(url, prefixes):
        log.warning("not posting to a response_url outside Slack: %.80s", url)
        return "refused"
    if not store().post_slot(url, MAX_POSTS, WINDOW_SECONDS):
        log.warning("response_url used %d times in %d minutes; not posting again", MAX_POSTS, WINDOW_SECONDS // 60)
        return "refused"
    body = json.dumps(message, ensure_ascii=False).encode("utf-8")
    req = urllib.request.Request(url, data=body, method="POST",
                                 headers={"Content-Type": "application/json; charset=utf-8"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 (https Slack URL, checked above)
            resp.read(4096)
            return "sent" if 200 <= resp.status < 300 else "failed"
    except (urllib.error.URLError, OSError) as exc:
        log.warning("posting to response_url failed: %s", exc)
        return "failed"


def post(url: str, message: dict[str, Any], prefixes: tuple[str, ...] = SLACK_HOSTS,
         timeout: float = TIMEOUT_SECONDS) -> bool:
    """POST a message to a response_url (inside an app context: the count is in its database);
    False (and a log line) when refused or failed."""
    return _send(url, message, prefixes, timeout) == "sent"


def _prefixes(app: Flask) -> tuple[str, ...]:
    value = app.config.get("SLACK_RESPONSE_URL_PREFIXES", SLACK_HOSTS)
    if isinstance(value, str):  # from the environment: comma-separated
        value = [part.strip() for part in value.split(",")]
    return tuple(part for part in value if part)


# ---------------------------------------------------------------- the outbox

def _perform(entry) -> dict | None:
    """Do an entry's work and keep its message; None when another worker has taken the entry over."""
    from ...web.context import store

    kind = JOBS[entry.kind]
    try:
        message = kind.work(entry.args, entry.id)
    except Exception:
        log.exception("Slack job %s failed", entry.kind)
        message = kind.failed(entry.args)
    return message if store().settle(entry, message) else None


def _deliver(app: Flask, entry, message: dict) -> None:
    """Post the message; the entry is done once posted (or refused for good). A failed post leaves
    it for the next worker to try when its lease lapses."""
    from ...web.context import store

    outcome = _send(entry.response_url, message, _prefixes(app), TIMEOUT_SECONDS)
    if outcome != "failed":
        store().finish(entry, "done" if outcome == "sent" else "refused")


def _lease(app: Flask) -> float:
    return float(app.config.get("SLACK_OUTBOX_LEASE_SECONDS", LEASE_SECONDS))


def in_time(kind: str, args: dict, response_url: str, ack: dict) -> dict:
    """The job's message if it is ready within ACK_SECONDS, else `ack`, with the message posted when ready.

    The work runs in a thread inside its own app context (its own database handle).
    """
    from ...web.context import store

    app = current_app._get_current_object()
    entry = store().enqueue(kind, args, response_url, _lease(app))
    budget = float(app.config.get("SLACK_ACK_SECONDS", ACK_SECONDS))
    lock = threading.Lock()
    box: dict[str, Any] = {"late": False}

    def run() -> None:
        with app.app_context():
            message = _perform(entry)
            with lock:
                box["result"] = message
                late = box["late"]
            if late and message is not None:
                _deliver(app, entry, message)

    thread = threading.Thread(target=run, name="slack-turn", daemon=True)
    thread.start()
    thread.join(budget)
    with lock:
        if box.get("result") is not None:
            store().finish(entry)
            return box["result"]
        box["late"] = True
    return ack


def later(kind: str, args: dict, response_url: str) -> threading.Thread:
    """Run the job in a thread and post its message to response_url."""
    from ...web.context import store

    app = current_app._get_current_object()
    entry = store().enqueue(kind, args, response_url, _lease(app))

    def run() -> None:
        with app.app_context():
            message = _perform(entry)
            if message is not None:
                _deliver(app, entry, message)

    thread = threading.Thread(target=run, name="slack-action", daemon=True)
    thread.start()
    return thread


def drain(app: Flask) -> int:
    """Take over every lapsed outbox entry and finish it; how many were taken."""
    from ...web.context import store

    taken = 0
    while True:
        with app.app_context():
            entry = store().claim_due(_lease(app))
            if entry is None:
                return taken
            taken += 1
            if entry.kind not in JOBS:
                log.error("outbox: no job named %r; dropped", entry.kind)
                store().finish(entry, "failed")
                continue
            message = entry.message
            if message is None and entry.attempts > MAX_ATTEMPTS:
                log.error("outbox: job %s tried %d times; telling the person it failed", entry.kind,
                          entry.attempts - 1)
                message = JOBS[entry.kind].failed(entry.args)
                store().settle(entry, message)
            elif message is None:
                message = _perform(entry)
            if message is not None:
                _deliver(app, entry, message)


_drainers: dict[tuple[int, int], threading.Thread] = {}
_drainers_lock = threading.Lock()


def start_drainer() -> None:
    """Before every request: make sure this process drains the outbox (once per process and app)."""
    app = current_app._get_current_object()
    poll = float(app.config.get("SLACK_OUTBOX_POLL_SECONDS", POLL_SECONDS))
    if poll <= 0 or app.testing:
        return
    key = (os.getpid(), id(app))
    if key in _drainers:
        return
    with _drainers_lock:
        if key in _drainers:
            return

        def loop() -> None:
            while True:
                try:
                    drain(app)
                except Exception:  # a database that is down for a moment must not end the thread
                    log.exception("outbox: draining failed; trying again")
                time.sleep(poll)

        thread = threading.Thread(target=loop, name="slack-outbox", daemon=True)
        _drainers[key] = thread
        thread.start()
