"""Slack: the `/oom` slash command and its buttons, as one blueprint under /slack.

In this order, for every request: the app counts it by address (before anything is
parsed); verify.py checks Slack's signature over the raw bytes and refuses a replay;
only then is the body parsed and the request counted for its workspace user.
commands.py and interactions.py turn Slack's fields into consultation turns and render
the reply with oomdoctor.render.blocks; responder.py posts late replies to Slack's
response_url.
"""
from __future__ import annotations

from flask import Blueprint

from ...web.security import limit_verified
from . import payload, verify



def per_workspace_user():
    """Count a verified request for its workspace user (the ids are Slack's own once signed)."""
    team, user = payload.identity()
    if team or user:
        return limit_verified(f"slack:{team[:32]}:{user[:32]}")
    return None


bp = Blueprint("slack", __name__, url_prefix="/slack")
# Flask runs a blueprint's hooks in the order they were added: the signature first.
bp.before_request(verify.signed_by_slack)
bp.before_request(per_workspace_user)


@bp.record_once
def _keep_raw_body(state) -> None:
    # The signature covers the raw bytes: the very first hook of every request under /slack/
    # caches the body, so nothing that runs before the check can consume or parse it.
    state.app.before_request_funcs.setdefault(None, []).insert(0, verify.cache_raw_body)


from . import commands, interactions  # noqa: E402,F401  (they add their routes to bp)
