"""Settings: defaults, then environment variables (OOMDOCTOR_*), then a test's overrides."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .knowledge import ROOT

DEFAULTS: dict[str, Any] = {
    "DATABASE": str(ROOT / "var" / "oomdoctor.sqlite3"),
    "DEFAULT_LANG": "en",
    # A pasted log may be long; 16 MiB keeps a whole training log but bounds the work.
    "MAX_MESSAGE_BYTES": 16 * 2**20,
    # Per channel, each at most MAX_MESSAGE_BYTES. Slack's own slash-command text is
    # short, so a larger Slack payload is not a paste but something else.
    "API_MAX_MESSAGE_BYTES": 16 * 2**20,
    "PAGE_MAX_MESSAGE_BYTES": 16 * 2**20,
    "SLACK_MAX_MESSAGE_BYTES": 64 * 2**10,
    "RETENTION_SECONDS": 30 * 24 * 3600,
    # How often a worker deletes what is older than RETENTION_SECONDS (also once at start).
    "RETENTION_SWEEP_SECONDS": 600,
    # When set, /api/ (but not /api/openapi.json) needs "Authorization: Bearer <token>".
    "API_TOKEN": "",
    "SLACK_SIGNING_SECRET": "",
    # Requests per minute per client address, per API token and per Slack user; 0 turns the limit off.
    # Sized for many people behind one address (an office's NAT): a message on the page costs at
    # most two requests (the post and, without JavaScript, the page it redirects to), so 600 lets
    # 50 people each send a message every 10 s; a consultation is a few messages over minutes.
    "RATE_LIMIT_PER_MINUTE": 600,
    # How many proxies in front of the service add X-Forwarded-For (and X-Forwarded-Proto); the
    # client's address is the one the outermost of them saw. 0 (the default): none is trusted,
    # the address is the socket's, and X-Forwarded-For is a client's claim, never read.
    "TRUSTED_PROXIES": 0,
    # Form posts outside /api/ and /slack/ must carry the csrf_token field.
    "CSRF_ENABLED": True,
    # JSON nested deeper than this is refused before it is parsed.
    "MAX_JSON_DEPTH": 32,
    # Parts of a multipart form; the page's own form has five fields at most.
    "MAX_FORM_PARTS": 50,
    # gunicorn's worker timeout (gunicorn.conf.py reads the same OOMDOCTOR_TIMEOUT): a request
    # still running then is ended with its worker.
    "TIMEOUT": 60,
    # Seconds a request may spend reading a message before it answers 422 instead; 0: half of TIMEOUT.
    "WORK_SECONDS": 0.0,
}

ENV_PREFIX = "OOMDOCTOR_"


def _coerce(default: Any, raw: str) -> Any:
    if isinstance(default, bool):
        return raw.strip().lower() in ("1", "true", "yes", "on")
    if isinstance(default, int):
        return int(raw)
    if isinstance(default, float):
        return float(raw)
    return raw


def from_environment(environ: dict[str, str] | None = None) -> dict[str, Any]:
    environ = os.environ if environ is None else environ
    settings = dict(DEFAULTS)
    for key, default in DEFAULTS.items():
        raw = environ.get(ENV_PREFIX + key)
        if raw is not None and raw != "":
            settings[key] = _coerce(default, raw)
    settings["DATABASE"] = str(Path(settings["DATABASE"]))
    if not settings["WORK_SECONDS"]:
        settings["WORK_SECONDS"] = settings["TIMEOUT"] / 2
    return settings
