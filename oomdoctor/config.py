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
    "RETENTION_SECONDS": 30 * 24 * 3600,
    "API_TOKEN": "",
    "SLACK_SIGNING_SECRET": "",
    "RATE_LIMIT_PER_MINUTE": 120,
}

ENV_PREFIX = "OOMDOCTOR_"


def _coerce(default: Any, raw: str) -> Any:
    if isinstance(default, bool):
        return raw.strip().lower() in ("1", "true", "yes", "on")
    if isinstance(default, int):
        return int(raw)
    return raw


def from_environment(environ: dict[str, str] | None = None) -> dict[str, Any]:
    environ = os.environ if environ is None else environ
    settings = dict(DEFAULTS)
    for key, default in DEFAULTS.items():
        raw = environ.get(ENV_PREFIX + key)
        if raw is not None and raw != "":
            settings[key] = _coerce(default, raw)
    settings["DATABASE"] = str(Path(settings["DATABASE"]))
    return settings
