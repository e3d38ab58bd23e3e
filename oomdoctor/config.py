"""Settings: defaults, then environment variables (OOMDOCTOR_*), then a test's overrides."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote, urlsplit

from .knowledge import ROOT

DEFAULTS: dict[str, Any] = {
    # An SQLite file (a path, or sqlite:///path) or a PostgreSQL server (postgresql://user:password@host/dbname).
    "DATABASE": str(ROOT / "var" / "oomdoctor.sqlite3"),
    # PostgreSQL only: connections each process keeps (a worker's threads and its Slack outbox share them).
    "DATABASE_POOL_SIZE": 4,
    "DEFAULT_LANG": "en",
    # A pasted log may be long; 16 MiB keeps a whole training log but bounds the work.
    "MAX_MESSAGE_BYTES": 16 * 2**20,
    # Per channel, each at most MAX_MESSAGE_BYTES. Slack's own slash-command text is
    # short, so a larger Slack payload is not a paste but something else.
    "API_MAX_MESSAGE_BYTES": 16 * 2**20,
    "PAGE_MAX_MESSAGE_BYTES": 16 * 2**20,
    "SLACK_MAX_MESSAGE_BYTES": 64 * 2**10,
    # What an assistant passes to an MCP tool, and what a Lark message holds (Lark caps a text
    # message at 150 KB), each at most MAX_MESSAGE_BYTES.
    "MCP_MAX_MESSAGE_BYTES": 16 * 2**20,
    "LARK_MAX_MESSAGE_BYTES": 150 * 2**10,
    "RETENTION_SECONDS": 30 * 24 * 3600,
    # How often a worker deletes what is older than RETENTION_SECONDS (also once at start).
    "RETENTION_SWEEP_SECONDS": 600,
    # When set, /api/ (but not /api/openapi.json) needs "Authorization: Bearer <token>".
    "API_TOKEN": "",
    "SLACK_SIGNING_SECRET": "",
    # Where Slack's response_urls may point, comma-separated (a late reply is posted nowhere else).
    "SLACK_RESPONSE_URL_PREFIXES": "https://hooks.slack.com/,https://hooks.slack-gov.com/",
    # Seconds a Slack command waits for its turn before it acknowledges and posts the reply later.
    "SLACK_ACK_SECONDS": 2.0,
    # The outbox of late Slack replies: how long the worker that starts one holds it before any
    # other may take it over, and how often each worker looks for such lapsed ones (0: never).
    "SLACK_OUTBOX_LEASE_SECONDS": 90.0,
    "SLACK_OUTBOX_POLL_SECONDS": 2.0,
    # The Feishu/Lark app (docs/lark.md). Every /lark/ request is refused while the verification
    # token or the encrypt key is empty: without the key Lark neither encrypts nor signs events.
    "LARK_APP_ID": "",
    "LARK_APP_SECRET": "",
    "LARK_VERIFICATION_TOKEN": "",
    "LARK_ENCRYPT_KEY": "",
    # Feishu (China); https://open.larksuite.com for Lark.
    "LARK_DOMAIN": "https://open.feishu.cn",
    # The bot's language until the user writes Chinese or English of their own.
    "LARK_DEFAULT_LANG": "zh",
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
    if isinstance(default, float):
        return float(raw)
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
    if database(settings["DATABASE"]).kind == "sqlite":
        settings["DATABASE"] = str(Path(settings["DATABASE"]))
    if not settings["WORK_SECONDS"]:
        settings["WORK_SECONDS"] = settings["TIMEOUT"] / 2
    return settings


class Database(NamedTuple):
    """Where consultations are kept: ("sqlite", a file path) or ("postgresql", a libpq URL)."""
    kind: str
    target: str


POSTGRES_SCHEMES = ("postgresql", "postgres")


def database(value: str) -> Database:
    """Read OOMDOCTOR_DATABASE: `postgresql://…` (or `postgres://…`) is a PostgreSQL server,
    `sqlite:///path` or a plain path is an SQLite file. Any other `scheme://` is refused, so a
    typo never becomes a file named after a URL."""
    value = str(value).strip()
    scheme, sep, _ = value.partition("://")
    if not sep:
        return Database("sqlite", value)
    scheme = scheme.lower()
    if scheme in POSTGRES_SCHEMES:
        return Database("postgresql", value)
    if scheme == "sqlite":
        path = unquote(urlsplit(value).path)
        # sqlite:///relative/x.db names relative/x.db; sqlite:////abs/x.db names /abs/x.db (SQLAlchemy's form).
        return Database("sqlite", path[1:] if path.startswith("/") else path or ":memory:")
    raise ValueError(f"OOMDOCTOR_DATABASE: unknown scheme {scheme!r}; use a file path, sqlite:///path "
                     f"or postgresql://user@host/dbname")
