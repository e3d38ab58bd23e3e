"""The tools an assistant calls, each a plain function of its arguments over the application service.

A tool's result is the reply as data (the structured content) and the chat Markdown of it
(the text content, render/markdown.py); a tool that cannot do what was asked raises ToolError
with a message the assistant can act on.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ...consultation import Consultant
from ...redaction import redact
from ...render import markdown
from ...service import Consultations, EstimateInputError, NotFound
from ...storage import Store
from ...web import input as check
from ...web.errors import BadInput
from . import CHANNEL, lookup

DESCRIPTIONS = {
    "diagnose": (
        "Diagnose an out-of-memory failure in LLM fine-tuning from what the user pasted, in one shot: what ran out "
        "(GPU memory, host RAM, or something that only looks like OOM such as an NCCL timeout), the likely causes "
        "with the evidence, a memory estimate per GPU broken into weights, gradients, optimizer states, activations, "
        "logits and overhead against the GPU's capacity, and ranked remedies with the exact config change. Missing "
        "facts are assumed and listed in `assumptions`; nothing is stored. Use consult instead when you can ask the "
        "user follow-up questions."),
    "consult": (
        "Start or continue a consultation about an out-of-memory failure in LLM fine-tuning. The first call (no "
        "consultation_id) takes what the user pasted; the result is either a question to put to the user "
        "(status 'question', with numbered options) or the full report (status 'report'). Pass the user's answer "
        "back as `message` with the returned consultation_id: the option's number ('2'), its label, a value in "
        "words, or 'skip' when they do not know. More logs or configs may be sent the same way at any time; the "
        "report is updated. Consultations are stored; the same id works over the REST API."),
    "estimate": (
        "Estimate the GPU memory and host RAM of a fine-tuning set-up from named settings, without any log: give "
        "at least the model (or params_b, or config) and ideally method, batch_size, seq_len and gpu. Returns the "
        "per-GPU estimate with its breakdown, whether it fits the GPU, the assumptions made for what was not given, "
        "and `whatif`: the changes that lower it most, each with the estimate after it."),
    "models": (
        "Look up a model in OOM Doctor's catalog by the name the user wrote (fuzzy: 'llama 3 8b', 'Qwen2.5-7B-"
        "Instruct'). Returns the entry the estimator would use, with its shape and computed parameter count, and "
        "near names as candidates; an empty query lists every catalog id. Use it to check a model name before "
        "estimate, or to ask the user which model they meant."),
    "gpus": (
        "Look up a GPU in OOM Doctor's catalog by the name the user wrote (fuzzy: '4090', 'A100 80G', 'H100 SXM'). "
        "Returns the entry the estimator would use with its memory in GiB (as nvidia-smi reports it where known), "
        "and near names as candidates; an empty query lists every catalog id. A bare 'A100' is ambiguous "
        "(40 or 80 GB): the match's score says so."),
}
TITLES = {"diagnose": "Diagnose an OOM", "consult": "OOM consultation", "estimate": "Estimate fine-tuning memory",
          "models": "Model catalog", "gpus": "GPU catalog"}


class ToolError(Exception):
    """What the assistant did wrong or can do next, said so that it can."""


@dataclass
class Result:
    data: dict[str, Any]
    text: str


class Tools:
    """One instance per server: `consultant` is shared, each call opens (and closes) its own store handle."""

    def __init__(self, consultant: Consultant, database: str, max_message_bytes: int) -> None:
        self.consultant = consultant
        self.database = database
        self.max_message_bytes = max_message_bytes

    @property
    def kb(self):
        return self.consultant.kb

    def call(self, name: str, arguments: dict[str, Any]) -> Result:
        handler: Callable[[dict[str, Any]], Result] = getattr(self, "_" + name)
        return handler(arguments)

    @contextlib.contextmanager
    def _service(self) -> Iterator[Consultations]:
        opened: list[Store] = []

        def open_store() -> Store:
            opened.append(Store(self.database, migrate=False))
            return opened[-1]

        try:
            yield Consultations(self.consultant, open_store)
        finally:
            for store in opened:
                store.close()

    def _message(self, raw: Any) -> str:
        """The same checks and redaction as every other channel's messages."""
        try:
            return check.message_text(raw, self.max_message_bytes)
        except BadInput as exc:
            raise ToolError(exc.message.replace("'message'", "the text")) from None

    def _diagnose(self, args: dict[str, Any]) -> Result:
        text = self._message(args["text"])
        with self._service() as service:
            reply = service.diagnose(text, args.get("lang"))
        return Result(reply_data(reply), markdown.render(reply, self.kb))

    def _consult(self, args: dict[str, Any]) -> Result:
        message = self._message(args["message"])
        with self._service() as service:
            cid = args.get("consultation_id")
            if cid is None:
                cid, reply = service.start(message, channel=CHANNEL, lang=args.get("lang"))
            else:
                try:
                    reply = service.reply(cid, message, args.get("lang"), channel=CHANNEL)
                except NotFound:
                    raise ToolError(f"no consultation {cid}: it was deleted or has expired; call consult without "
                                    "consultation_id to start a new one") from None
        text = markdown.render(reply, self.kb)
        if reply["status"] == "question":
            text += "\n\n" + self.kb.text("mcp.continue", reply["lang"], id=cid)
        return Result({"consultation_id": cid, "status": reply["status"], "reply": reply_data(reply)}, text)

    def _estimate(self, args: dict[str, Any]) -> Result:
        inputs = {k: redact(v).text if isinstance(v, str) else v for k, v in args.items() if k != "lang"}
        with self._service() as service:
            try:
                reply = service.estimate(inputs, args.get("lang") or "en")
            except EstimateInputError as exc:
                raise ToolError(f"{exc}; the models and gpus tools show the names the catalog knows") from None
        return Result(reply, markdown.render_estimate(reply, self.kb))

    def _models(self, args: dict[str, Any]) -> Result:
        found = lookup.models(args.get("query", ""), args.get("limit", 5))
        return Result(found, self._catalog_text(found, args.get("lang") or "en", "mcp.model"))

    def _gpus(self, args: dict[str, Any]) -> Result:
        found = lookup.gpus(args.get("query", ""), args.get("limit", 5))
        return Result(found, self._catalog_text(found, args.get("lang") or "en", "mcp.gpu"))

    def _catalog_text(self, found: dict[str, Any], lang: str, entry_key: str) -> str:
        """A look-up in a few lines: the match, then the near names."""
        t = lambda key, **kw: self.kb.text(key, lang, **kw)  # noqa: E731
        if not found["query"]:
            return t("mcp.catalog", ids=", ".join(found["catalog"]))
        line = lambda e: t(entry_key, **{k: v for k, v in e.items() if isinstance(v, (str, int, float))})  # noqa: E731
        match = found["match"]
        lines = [t("mcp.match", entry=line(match), score=f"{match['score']:.0f}") if match
                 else t("mcp.no_match", query=found["query"])]
        lines += [f"- {line(c)}" for c in found["candidates"]]
        return "\n".join(lines)


def reply_data(reply: dict[str, Any]) -> dict[str, Any]:
    """The reply as structured content: without its plain-text rendering (the text content has the
    chat one) and the engine's rule traces (each diagnosis keeps its `why`)."""
    data = {k: v for k, v in reply.items() if k != "text"}
    data["diagnoses"] = [{k: v for k, v in d.items() if k != "trace"} for d in reply.get("diagnoses", [])]
    return data
