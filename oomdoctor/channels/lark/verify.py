"""Lark's request protection, checked before anything reads an event.

With an Encrypt Key set in the app's console, Lark sends `{"encrypt": base64(iv + AES-256-CBC
(sha256(key), PKCS#7))}` and signs each event delivery with X-Lark-Signature =
sha256(timestamp + nonce + encrypt_key + raw body); the decrypted event carries the app's
Verification Token. A request passes only if it is encrypted with our key, carries our token,
and (every event but the one-time URL verification, which Lark does not sign) is signed and
at most five minutes old. Plain-text events are refused: this service needs both settings.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from typing import Any

from flask import current_app, g, jsonify, request

log = logging.getLogger(__name__)

TIMESTAMP_HEADER = "X-Lark-Request-Timestamp"
NONCE_HEADER = "X-Lark-Request-Nonce"
SIGNATURE_HEADER = "X-Lark-Signature"
MAX_AGE_SECONDS = 300
URL_VERIFICATION = "url_verification"


class Refused(Exception):
    """Why a request is not Lark's; logged, never shown."""


def signature(encrypt_key: str, timestamp: str, nonce: str, body: bytes) -> str:
    return hashlib.sha256((timestamp + nonce + encrypt_key).encode("utf-8") + body).hexdigest()


def decrypt(encrypt_key: str, blob: str) -> dict[str, Any]:
    from lark_oapi.core.utils import AESCipher  # here: importing the SDK takes seconds (see events._sdk)

    try:
        plain = AESCipher(encrypt_key).decrypt_str(blob)
        payload = json.loads(plain)
    except ValueError as exc:  # base64, length, padding, UTF-8 or JSON: not ours
        raise Refused(f"cannot decrypt: {exc}") from None
    if not isinstance(payload, dict):
        raise Refused("the decrypted event is not an object")
    return payload


def token_of(payload: dict[str, Any]) -> str:
    """The verification token: in the header of a v2 event, at the top of the URL verification."""
    header = payload.get("header")
    token = header.get("token") if isinstance(header, dict) else payload.get("token")
    return token if isinstance(token, str) else ""


def event_type(payload: dict[str, Any]) -> str:
    header = payload.get("header")
    kind = header.get("event_type") if isinstance(header, dict) else payload.get("type")
    return kind if isinstance(kind, str) else ""


def check(body: bytes, headers, encrypt_key: str, verification_token: str, now: float) -> dict[str, Any]:
    """The decrypted event, or Refused."""
    if not encrypt_key or not verification_token:
        raise Refused("OOMDOCTOR_LARK_ENCRYPT_KEY and OOMDOCTOR_LARK_VERIFICATION_TOKEN must both be set")
    try:
        envelope = json.loads(body)
    except ValueError:
        raise Refused("the body is not JSON") from None
    blob = envelope.get("encrypt") if isinstance(envelope, dict) else None
    if not isinstance(blob, str) or not blob:
        raise Refused("the event is not encrypted")
    timestamp, nonce, signed = (headers.get(TIMESTAMP_HEADER), headers.get(NONCE_HEADER),
                                headers.get(SIGNATURE_HEADER))
    if signed is not None:
        if not timestamp or not nonce or not timestamp.isdigit() or len(timestamp) > 12:
            raise Refused("signature without a usable timestamp and nonce")
        if abs(now - int(timestamp)) > MAX_AGE_SECONDS:
            raise Refused("stale or future timestamp")
        if not hmac.compare_digest(signature(encrypt_key, timestamp, nonce, body), signed):
            raise Refused("wrong signature")
    payload = decrypt(encrypt_key, blob)
    if signed is None and event_type(payload) != URL_VERIFICATION:
        raise Refused("an unsigned event")
    if not hmac.compare_digest(token_of(payload).encode("utf-8"), verification_token.encode("utf-8")):
        raise Refused("wrong verification token")
    return payload


def body_limit(config) -> int:
    """The largest event body: a message at its limit, escaped twice (the content is JSON text inside
    the event's JSON), grown by a third in base64, plus the envelope."""
    return 4 * min(config["MAX_MESSAGE_BYTES"], config["LARK_MAX_MESSAGE_BYTES"]) + 64 * 1024


def signed_by_lark():
    """before_request for the Lark blueprint: refuse anything that is not Lark's, as 401."""
    config = current_app.config
    if (request.content_length or 0) > body_limit(config):
        return jsonify(error="request too large", status=413), 413
    try:
        g.lark_event = check(request.get_data(cache=True), request.headers, config["LARK_ENCRYPT_KEY"],
                             config["LARK_VERIFICATION_TOKEN"], time.time())
    except Refused as exc:
        log.info("Lark request refused: %s", exc)
        return jsonify(error="request not from Lark", status=401), 401
    return None
