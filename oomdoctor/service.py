"""The application service every channel stands on: take a consultation's turn, store it, reply.

Channels (REST, the web page, Slack, the CLI, and the bots to come) turn their own
input into calls here and render what comes back; none of them takes a turn or reads
a consultation any other way, and none imports another. (Slack's outbox of late
replies is a delivery queue of that channel, kept in the same database.) The service
knows nothing of HTTP, Slack or the terminal.

A consultation belongs to the channel that started it ("api", "web", "slack:<channel>",
"cli"): continuing, reading or deleting it names the channel, and another channel's
consultation is not found. So the open web page is no side door into consultations
started over the token-guarded API, and the API none into the page's or Slack's.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from .consultation import Consultant, State
from .language import LANGUAGES
from .named_inputs import EstimateInputError, estimate_reply
from .observation import OutOfTime
from .storage import NotFound, Store

__all__ = ["Consultations", "EstimateInputError", "NotFound", "OutOfTime"]


class Consultations:
    """Consultations over one store handle. Cheap to build: one per request in the web layer.

    `open_store` is called the first time a consultation is stored or read, so one-shot
    diagnoses and estimates never open the database.
    """

    def __init__(self, consultant: Consultant, open_store: Callable[[], Store]) -> None:
        self.consultant = consultant
        self._open_store = open_store

    @functools.cached_property
    def store(self) -> Store:
        return self._open_store()

    @property
    def kb(self):
        return self.consultant.kb

    def start(self, message: str, *, channel: str, owner: str = "", lang: str | None = None,
              request_id: str | None = None) -> tuple[str, dict]:
        """A new consultation with its first message: (id, reply).

        The first turn and the consultation are one unit: the turn is taken before anything
        is stored, so a turn that fails leaves no empty consultation behind, and a store that
        fails after the row was made takes the row away again.
        """
        first = self._step(State().to_dict(), message, lang)
        cid = self.store.create(State().to_dict(), owner=owner, channel=channel)
        try:
            # Nobody else knows the new id, so the state the turn was taken on is still the stored one.
            return cid, self.store.turn(cid, message, lambda _raw: first, request_id=request_id)
        except BaseException:
            self.store.delete(cid)
            raise

    def open(self, *, channel: str, owner: str = "", lang: str | None = None) -> str:
        """A new consultation with no message yet (Slack's `/oom new`, `/oom lang zh`)."""
        return self.store.create(State(lang=lang).to_dict(), owner=owner, channel=channel)

    def reply(self, cid: str, message: str, lang: str | None = None, *, channel: str,
              request_id: str | None = None) -> dict:
        """The next turn; `lang` forces the reply's language, else the message and the consultation decide.
        A turn retried under the same `request_id` (a late reply's outbox entry) is stored once.
        Raises NotFound for an unknown id, or one of another channel."""
        self.record(cid, channel=channel)
        return self.store.turn(cid, message, lambda raw: self._step(raw, message, lang), request_id=request_id)

    def answered(self, cid: str, request_id: str | None) -> bool:
        """Whether a turn under this request id is stored already (a late reply retried by another worker)."""
        return self.store.answered(cid, request_id)

    def set_lang(self, cid: str, lang: str, said: str, *, channel: str) -> None:
        """Store a language preference as a turn of its own (no reply to render)."""
        self.record(cid, channel=channel)
        self.store.turn(cid, said, lambda raw: ({**raw, "lang": lang}, {"status": "setting", "lang": lang,
                                                                         "text": f"lang {lang}"}))

    def record(self, cid: str, *, channel: str) -> dict[str, Any]:
        """The stored consultation; NotFound for an unknown id, or one another channel started."""
        record = self.store.get(cid)
        if record["channel"] != channel:
            raise NotFound(cid)
        return record

    def lang(self, cid: str | None) -> str | None:
        """The consultation's language, if it has one."""
        if cid is None:
            return None
        lang = self.store.get(cid)["state"].get("lang")
        return lang if lang in LANGUAGES else None

    def find(self, owner: str, channel: str) -> str | None:
        """The latest consultation of this owner in this channel."""
        return self.store.find(owner, channel)

    def delete(self, cid: str, *, channel: str) -> bool:
        try:
            self.record(cid, channel=channel)
        except NotFound:
            return False
        return self.store.delete(cid)

    def diagnose(self, message: str, lang: str | None = None) -> dict:
        """One shot, nothing stored: no questions, assumptions stated."""
        return self.consultant.diagnose(message, lang)

    def estimate(self, inputs: dict[str, Any], lang: str = "en") -> dict:
        """A stateless estimate from named inputs; raises EstimateInputError for bad ones."""
        return estimate_reply(inputs, lang)

    def _step(self, raw_state: dict, message: str, lang: str | None) -> tuple[dict, dict]:
        state, reply = self.consultant.take_turn(State.from_dict(raw_state), message, lang)
        return state.to_dict(), reply
