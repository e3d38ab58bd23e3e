"""Slack: the `/oom` slash command and its buttons, as one blueprint under /slack.

In this order, for every request: the app counts it by address (before anything is
parsed); verify.py checks Slack's signature over the raw bytes and refuses a replay;
only then is the body parsed and the request counted for its workspace user.
commands.py and interactions.py turn Slack's fields into consultation turns and render
the reply with oomdoctor.render.blocks; responder.py records late replies in the
database's outbox and posts them to Slack's response_url, from whichever worker is alive.
"""
from __future__ import annotations

from flask import Blueprint

from ...web.security import limit_verified
from . import payload, responder, verify


def per_workspace_user():
    """Count a verified request for its workspace user (the ids are Slack's own once signed)."""
    team, user = payload.identity()
    if team or user:
        return limit_verified(f"slack:{team[:32]}:{user[:32]}")
    return None


bp = Blueprint("slack", __name__, url_prefix="/slack")
# Flask runs the app's hooks, then a blueprint's in the order they were added: the signature
# first. None of the app's hooks reads a /slack/ body, so the signature is checked on the raw
# bytes and an unsigned body is never parsed (tests/test_security_access.py).
bp.before_request(verify.signed_by_slack)
bp.before_request(per_workspace_user)


@bp.record_once
def _drain(state) -> None:
    # Every worker drains the outbox of late replies, whichever requests it serves.
    state.app.before_request(responder.start_drainer)


from . import commands, interactions  # noqa: E402,F401  (they add their routes to bp)
