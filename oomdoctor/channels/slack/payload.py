"""What a signed Slack request says, read defensively: Slack's own shapes, typed and bounded.

The signature proves Slack sent the bytes, not that every field has the shape its
documentation shows (a test harness, a changed API, a replayed old format). Every
reader here answers a string or None; nothing a field holds can raise further in.
"""
from __future__ import annotations

import json
from typing import Any

from flask import request

from ...web import input as check

# Slack's payloads nest a handful of levels (blocks inside a view inside the payload).
MAX_DEPTH = 32


def interaction() -> dict[str, Any] | None:
    """The `payload` form field of an interaction as a JSON object; None for anything else."""
    raw = request.form.get("payload", "")
    data = raw.encode("utf-8", "surrogatepass")
    if not raw or check.too_deep(data, MAX_DEPTH):
        return None
    try:
        payload = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return payload if isinstance(payload, dict) else None


def text(obj: Any, *path: str, limit: int = 4096) -> str:
    """The string at `path` inside nested objects; "" when a step is not an object or the end not a string."""
    for key in path:
        if not isinstance(obj, dict):
            return ""
        obj = obj.get(key)
    return obj[:limit] if isinstance(obj, str) else ""


def first_action(payload: dict[str, Any]) -> dict[str, Any] | None:
    actions = payload.get("actions")
    if isinstance(actions, list) and actions and isinstance(actions[0], dict):
        return actions[0]
    return None


def identity() -> tuple[str, str]:
    """(team id, user id) of a command or an interaction; empty strings where the request has none."""
    if request.path.endswith("/interactions"):
        payload = interaction() or {}
        return text(payload, "team", "id") or text(payload, "user", "team_id"), text(payload, "user", "id")
    return request.form.get("team_id", ""), request.form.get("user_id", "")
