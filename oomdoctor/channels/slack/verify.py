"""Slack's request signing: HMAC-SHA256 over `v0:timestamp:raw_body`, at most five minutes old.

https://api.slack.com/authentication/verifying-requests-from-slack. The raw body
is read before Flask parses the form, so the bytes checked are the bytes sent.
"""
from __future__ import annotations

import logging

from flask import current_app, jsonify, request
from slack_sdk.signature import SignatureVerifier

log = logging.getLogger(__name__)

TIMESTAMP_HEADER = "X-Slack-Request-Timestamp"
SIGNATURE_HEADER = "X-Slack-Signature"


def is_signed(secret: str, body: bytes, timestamp: str | None, signature: str | None) -> bool:
    if not secret or not timestamp or not signature:
        return False
    try:
        return SignatureVerifier(secret).is_valid(body, timestamp, signature)
    except (ValueError, UnicodeDecodeError):  # a timestamp that is not a number, a body that is not UTF-8
        return False


def cache_raw_body() -> None:
    """App-wide first hook: keep a Slack request's raw body, so form parsing reads the cached copy."""
    if request.path.startswith("/slack/"):
        request.get_data(cache=True)


def signed_by_slack():
    """before_request for the Slack blueprint: refuse anything Slack did not sign, just now."""
    secret = current_app.config.get("SLACK_SIGNING_SECRET", "")
    body = request.get_data(cache=True)  # before request.form, which would consume the stream
    if is_signed(secret, body, request.headers.get(TIMESTAMP_HEADER), request.headers.get(SIGNATURE_HEADER)):
        return None
    if not secret:
        log.warning("Slack request refused: OOMDOCTOR_SLACK_SIGNING_SECRET is not set")
    else:
        log.info("Slack request refused: missing, stale or wrong signature")
    return jsonify(error="request not signed by Slack", status=401), 401
