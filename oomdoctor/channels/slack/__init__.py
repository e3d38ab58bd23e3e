"""Slack: the `/oom` slash command and its buttons, as one blueprint under /slack.

Every request is checked against the app's signing secret before anything else
runs (verify.py); commands.py and interactions.py only turn Slack's form fields
into consultation turns and render the reply with oomdoctor.render.blocks;
responder.py posts late replies to Slack's response_url.
"""
from __future__ import annotations

from flask import Blueprint

from . import responder, verify

bp = Blueprint("slack", __name__, url_prefix="/slack")
bp.before_request(verify.signed_by_slack)


@bp.record_once
def _keep_raw_body(state) -> None:
    # The signature covers the raw bytes. An app-wide hook that reads request.form first
    # (the rate limiter keys Slack requests by team and user) would consume them, so the
    # very first hook of every request under /slack/ caches the body before anything else.
    state.app.before_request_funcs.setdefault(None, []).insert(0, verify.cache_raw_body)
    # Every worker drains the outbox of late replies, whichever requests it serves.
    state.app.before_request(responder.start_drainer)

from . import commands, interactions  # noqa: E402,F401  (they add their routes to bp)
