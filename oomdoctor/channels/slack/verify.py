"""Slack's request signing: HMAC-SHA256 over `v0:timestamp:raw_body`, at most five minutes old,
and each signed request answered once.

https://api.slack.com/authentication/verifying-requests-from-slack. The raw body
is read before anything parses it, so the bytes checked are the bytes sent, and
nothing of an unsigned request is parsed at all.
"""
from __future__ import annotations

import hashlib
import logging
import time

from flask import current_app, jsonify, request
from slack_sdk.signature import SignatureVerifier

from ...web.context import store

log = logging.getLogger(__name__)

TIMESTAMP_HEADER = "X-Slack-Request-Timestamp"
SIGNATURE_HEADER = "X-Slack-Signature"
# slack_sdk refuses a timestamp more than five minutes from now, either way; a signature is
# remembered for both sides of that window, so it cannot come back while it is still valid.
REPLAY_WINDOW_SECONDS = 2 * 5 * 60


def is_signed(secret: str, body: bytes, timestamp: str | None, signature: str | None) -> bool:
    if not secret or not timestamp or not signature:
        return False
    try:
        return SignatureVerifier(secret).is_valid(body, timestamp, signature)
    except (ValueError, UnicodeDecodeError, OverflowError):  # a timestamp that is not a number, a body not UTF-8
        return False


def signed_by_slack():
    """before_request for the Slack blueprint: refuse anything Slack did not sign, just now, or signed before."""
    secret = current_app.config.get("SLACK_SIGNING_SECRET", "")
    body = request.get_data(cache=True, parse_form_data=False)  # the bytes, unparsed
    signature = request.headers.get(SIGNATURE_HEADER)
    if not is_signed(secret, body, request.headers.get(TIMESTAMP_HEADER), signature):
        if not secret:
            log.warning("Slack request refused: OOMDOCTOR_SLACK_SIGNING_SECRET is not set")
        else:
            log.info("Slack request refused: missing, stale or wrong signature")
        return jsonify(error="request not signed by Slack", status=401), 401
    # The signature covers the timestamp and the body: the same signature is the same request.
    key = "slack-signature:" + hashlib.sha256(signature.encode("ascii", "replace")).hexdigest()
    if not store().first_delivery(key, keep_seconds=REPLAY_WINDOW_SECONDS):
        log.warning("Slack request refused: a replay of a request already answered")
        return jsonify(error="this request was already answered", status=409), 409
    return None
