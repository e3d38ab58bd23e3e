"""A consultation without a channel: push a message, pop the reply.

Tests, benches and the CLI drive consultations the same way a channel does
(state in, message in, state and reply out), without HTTP, Slack or storage.
"""
from __future__ import annotations

from collections import deque

from .consultation import Consultant, State, default


class Conversation:
    def __init__(self, consultant: Consultant | None = None, lang: str | None = None) -> None:
        self.consultant = consultant or default()
        self.lang = lang
        self.state = State()
        self.transcript: list[tuple[str, dict]] = []
        self._unread: deque[dict] = deque()

    def push(self, message: str, lang: str | None = None) -> None:
        """Send one message; its reply waits to be popped."""
        self.state, reply = self.consultant.take_turn(self.state, message, lang or self.lang)
        self.transcript.append((message, reply))
        self._unread.append(reply)

    def pop(self) -> dict:
        """The oldest reply not read yet."""
        if not self._unread:
            raise LookupError("no reply waiting: push a message first")
        return self._unread.popleft()

    @property
    def replies(self) -> list[dict]:
        return [reply for _, reply in self.transcript]
