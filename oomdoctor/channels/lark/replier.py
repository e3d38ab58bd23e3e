"""Posting replies with Lark's reply API through the official SDK's client.

One client per app: it fetches the tenant access token with the app's id and secret and
keeps it until shortly before it expires. A reply that fails is logged and dropped (the
event has been acknowledged; Lark will not deliver it again).
"""
from __future__ import annotations

import json
import logging
from typing import Any

log = logging.getLogger(__name__)

TIMEOUT_SECONDS = 10.0


class Replier:
    def __init__(self, app_id: str, app_secret: str, domain: str, timeout: float = TIMEOUT_SECONDS) -> None:
        import lark_oapi as lark  # here: importing the SDK takes seconds (see events._sdk)

        self.client = (lark.Client.builder().app_id(app_id).app_secret(app_secret).domain(domain)
                       .timeout(timeout).log_level(lark.LogLevel.WARNING).build())

    def reply(self, message_id: str, card: dict[str, Any], key: str = "") -> bool:
        """Reply to a message with a card; `key` makes a repeated post of the same reply a no-op at Lark."""
        from lark_oapi.api.im.v1 import ReplyMessageRequest, ReplyMessageRequestBody

        body = ReplyMessageRequestBody.builder().msg_type("interactive").content(json.dumps(card, ensure_ascii=False))
        if key:
            body = body.uuid(key[:50])
        request = ReplyMessageRequest.builder().message_id(message_id).request_body(body.build()).build()
        try:
            response = self.client.im.v1.message.reply(request)
        except Exception as exc:  # the network, or the SDK failing to get a token
            log.warning("Lark reply to %.40s failed: %s", message_id, exc)
            return False
        if not response.success():
            log.warning("Lark reply to %.40s refused: code %s, %s", message_id, response.code, response.msg)
            return False
        return True
