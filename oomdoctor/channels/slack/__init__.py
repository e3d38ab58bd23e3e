"""Slack: the `/oom` slash command and its buttons, as one blueprint under /slack.

Every request is checked against the app's signing secret before anything else
runs (verify.py); commands.py and interactions.py only turn Slack's form fields
into consultation turns and render the reply with oomdoctor.render.blocks;
responder.py posts late replies to Slack's response_url.
"""
from __future__ import annotations

from flask import Blueprint

from . import verify

bp = Blueprint("slack", __name__, url_prefix="/slack")
bp.before_request(verify.signed_by_slack)

from . import commands, interactions  # noqa: E402,F401  (they add their routes to bp)
