"""The OpenAPI document for the REST API, built once from small schema pieces."""
from __future__ import annotations

import functools

from ...knowledge import default as knowledge
from ...named_inputs import INPUTS, ranges
from ...render import markdown

_MESSAGE = {
    "type": "object",
    "required": ["message"],
    "additionalProperties": False,
    "properties": {
        "message": {"type": "string", "minLength": 1, "description": "A traceback, tool output, a config or a sentence."},
        "lang": {"type": "string", "enum": ["en", "zh"], "description": "Reply language; default: the message's."},
    },
}
_ERROR = {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}, "status": {"type": "integer"}}}
_REPLY = {
    "type": "object",
    "required": ["status", "lang", "oom_kind", "facts", "diagnoses", "questions", "estimate", "remedies", "assumptions"],
    "properties": {
        "status": {"type": "string", "enum": ["question", "report"]},
        "lang": {"type": "string", "enum": ["en", "zh"]},
        "oom_kind": {"type": "string", "enum": ["gpu", "host", "not_memory", "unknown"]},
        "facts": {"type": "array", "items": {"type": "object"}},
        "diagnoses": {"type": "array", "items": {"type": "object", "required": ["id", "title", "confidence", "why"]}},
        "questions": {"type": "array", "items": {"type": "object", "required": ["id", "text", "why", "options"]}},
        "estimate": {"type": ["object", "null"]},
        "remedies": {"type": "array", "items": {"type": "object", "required": ["id", "title", "estimate_after_gib", "change"]}},
        "assumptions": {"type": "array", "items": {"type": "object"}},
        "text": {"type": "string"},
    },
}


# ?format=markdown&max_chars=N on every endpoint that replies: `text` becomes chat Markdown.
_FORMAT = [
    {"name": "format", "in": "query", "required": False,
     "description": "'markdown': the reply's `text` is a compact chat message (what ran out, the cause, the estimate "
                    "against the card, the top three remedies, or the question with numbered options; a reply of "
                    "'2' picks option 2). Default 'text': the plain-text rendering.",
     "schema": {"type": "string", "enum": ["text", "markdown"], "default": "text"}},
    {"name": "max_chars", "in": "query", "required": False,
     "description": "With format=markdown: the longest `text` in UTF-16 code units (what chat platforms count); "
                    f"default {markdown.DEFAULT_MAX_CHARS}, under Telegram's 4,096; 2000 for Discord.",
     "schema": {"type": "integer", "minimum": markdown.MIN_CHARS, "maximum": markdown.MAX_CHARS}},
]


_KINDS = {"integer": {"type": "integer"}, "number": {"type": "number"}, "boolean": {"type": "boolean"},
          "string": {"type": "string"}}


def _estimate_input(key: str) -> dict:
    """One named input's schema: its fact's type, its values or its range (named_inputs.ranges)."""
    spec = knowledge().facts[INPUTS[key]]
    if key == "config":
        return {"description": "a config.json, as an object or as JSON text",
                "oneOf": [{"type": "string"}, {"type": "object"}]}
    if key in ("model", "gpu"):
        return {"type": "string", "description": "a catalog name"}
    if spec.values:
        return {"enum": list(spec.values)}
    if spec.type == "list":
        return {"oneOf": [{"type": "array", "items": {"type": "string"}},
                          {"type": "string", "description": "comma-separated"}]}
    return {**_KINDS.get(spec.type, {}), **ranges(key)}


def _errors(*codes: int) -> dict:
    return {str(c): {"description": "error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}} for c in codes}


def _json(schema_ref: str, description: str = "ok") -> dict:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema_ref}"}}}}


@functools.lru_cache(maxsize=1)
def document() -> dict:
    message_body = {"required": True, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Message"}}}}
    cid = [{"name": "cid", "in": "path", "required": True, "schema": {"type": "string"}}]
    estimate_props = {name: _estimate_input(name) for name in INPUTS}
    estimate_props["lang"] = {"type": "string", "enum": ["en", "zh"]}
    return {
        "openapi": "3.0.3",
        "info": {"title": "OOM Doctor", "version": "1.0.0",
                 "description": "Diagnoses out-of-memory failures in LLM fine-tuning and estimates memory."},
        "paths": {
            "/healthz": {"get": {"responses": {"200": {"description": "ok"}}}},
            "/api/v1/consultations": {"post": {"parameters": _FORMAT, "requestBody": message_body,
                                                "responses": {"201": _json("Consultation", "created"), **_errors(400, 413, 415, 422)}}},
            "/api/v1/consultations/{cid}": {
                "get": {"parameters": cid, "responses": {"200": {"description": "transcript and state"}, **_errors(404)}},
                "delete": {"parameters": cid, "responses": {"204": {"description": "deleted"}, **_errors(404)}},
            },
            "/api/v1/consultations/{cid}/messages": {"post": {"parameters": cid + _FORMAT, "requestBody": message_body,
                                                              "responses": {"200": _json("Consultation"), **_errors(400, 404, 413, 415, 422)}}},
            "/api/v1/diagnose": {"post": {"parameters": _FORMAT, "requestBody": message_body, "responses": {"200": _json("Reply"), **_errors(400, 413, 415, 422)}}},
            "/api/v1/estimate": {"post": {"parameters": _FORMAT, "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "additionalProperties": False, "properties": estimate_props}}}},
                "responses": {"200": {"description": "estimate"}, **_errors(400, 413, 415)}}},
        },
        "components": {"schemas": {
            "Message": _MESSAGE,
            "Error": _ERROR,
            "Reply": _REPLY,
            "Consultation": {"type": "object", "required": ["id", "reply"],
                             "properties": {"id": {"type": "string"}, "reply": {"$ref": "#/components/schemas/Reply"}}},
        }},
    }
