"""Answering Slack in time: reply within the 3-second window, or acknowledge and post later.

Slack allows at most five posts to one response_url within 30 minutes; the
count is kept per process (each Slack action brings its own response_url, and
this service posts once per action, so one process sees all posts to a URL).
"""
from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from typing import Any, Callable

from flask import current_app

log = logging.getLogger(__name__)

TIMEOUT_SECONDS = 5.0
MAX_POSTS = 5
WINDOW_SECONDS = 30 * 60
# How long a request waits for the turn before it acknowledges instead (Slack gives up at 3 s).
ACK_SECONDS = 2.0
# Where a response_url may point; tests add their local server through the app's config.
SLACK_HOSTS = ("https://hooks.slack.com/", "https://hooks.slack-gov.com/")

_posts: dict[str, deque[float]] = {}
_lock = threading.Lock()


def _allowed(url: str, prefixes: tuple[str, ...]) -> bool:
    return any(url.startswith(prefix) for prefix in prefixes)


def _take_slot(url: str, now: float) -> bool:
    with _lock:
        for key in [k for k, times in _posts.items() if times and now - times[-1] > WINDOW_SECONDS]:
            del _posts[key]
        times = _posts.setdefault(url, deque())
        while times and now - times[0] > WINDOW_SECONDS:
            times.popleft()
        if len(times) >= MAX_POSTS:
            return False
        times.append(now)
        return True


def post(url: str, message: dict[str, Any], prefixes: tuple[str, ...] = SLACK_HOSTS,
         timeout: float = TIMEOUT_SECONDS) -> bool:
    """POST a message to a response_url; False (and a log line) when refused or failed."""
    if not _allowed(url, prefixes):
        log.warning("not posting to a response_url outside Slack: %.80s", url)
        return False
    if not _take_slot(url, time.time()):
        log.warning("response_url used %d times in %d minutes; not posting again", MAX_POSTS, WINDOW_SECONDS // 60)
        return False
    body = json.dumps(message, ensure_ascii=False).encode("utf-8")
    req = urllib.request.Request(url, data=body, method="POST",
                                 headers={"Content-Type": "application/json; charset=utf-8"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 (https Slack URL, checked above)
            resp.read(4096)
            return 200 <= resp.status < 300
    except (urllib.error.URLError, OSError) as exc:
        log.warning("posting to response_url failed: %s", exc)
        return False


def _prefixes() -> tuple[str, ...]:
    return tuple(current_app.config.get("SLACK_RESPONSE_URL_PREFIXES", SLACK_HOSTS))


def in_time(work: Callable[[], dict], response_url: str, ack: dict, failed: Callable[[], dict]) -> dict:
    """`work()`'s message if it is ready within ACK_SECONDS, else `ack`, with the message posted when ready.

    `work` runs in a thread inside its own app context (its own database handle).
    """
    app = current_app._get_current_object()
    budget = float(app.config.get("SLACK_ACK_SECONDS", ACK_SECONDS))
    prefixes = _prefixes()
    lock = threading.Lock()
    box: dict[str, Any] = {"late": False}

    def run() -> None:
        with app.app_context():
            try:
                result = work()
            except Exception:
                log.exception("Slack turn failed")
                result = failed()
        with lock:
            box["result"] = result
            late = box["late"]
        if late:
            post(response_url, result, prefixes)

    thread = threading.Thread(target=run, name="slack-turn", daemon=True)
    thread.start()
    thread.join(budget)
    with lock:
        if "result" in box:
            return box["result"]
        box["late"] = True
    return ack


def later(work: Callable[[], dict | None], response_url: str, failed: Callable[[], dict]) -> threading.Thread:
    """Run `work()` in a thread and post its message (if any) to response_url."""
    app = current_app._get_current_object()
    prefixes = _prefixes()

    def run() -> None:
        with app.app_context():
            try:
                result = work()
            except Exception:
                log.exception("Slack action failed")
                result = failed()
        if result is not None:
            post(response_url, result, prefixes)

    thread = threading.Thread(target=run, name="slack-action", daemon=True)
    thread.start()
    return thread
