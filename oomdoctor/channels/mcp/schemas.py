"""JSON Schemas of the tools' arguments and results, written for a language model to read.

The estimate's arguments come from the estimator's named inputs (named_inputs.INPUTS) and the
types and values of their facts in knowledge/facts.yaml, so a new input or enum value appears
here without an edit.
"""
from __future__ import annotations

from typing import Any

from ...knowledge import MAX_MAGNITUDE, KnowledgeBase
from ...language import LANGUAGES
from ...named_inputs import INPUTS

LANG = {"type": "string", "enum": list(LANGUAGES),
        "description": "Reply language: 'en' or 'zh'. Default: the language the user wrote in."}
# A consultation's id as the store makes it (uuid4 hex).
CONSULTATION_ID = {"type": "string", "pattern": "^[0-9a-f]{32}$",
                   "description": "The id a previous consult call returned; omit it to start a new consultation."}

# What an input's fact type becomes in JSON Schema.
_KINDS: dict[str, dict[str, Any]] = {
    "integer": {"type": "integer", "minimum": 0, "maximum": int(MAX_MAGNITUDE)},
    "number": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_MAGNITUDE},
    "boolean": {"type": "boolean"},
    "string": {"type": "string", "minLength": 1, "maxLength": 200_000},
    "list": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 100}, "maxItems": 64},
}
# Inputs whose fact text does not say enough for someone who has not seen the catalogs.
_HINTS = {
    "model": "A model name as people write it ('Llama-3-8B', 'Qwen2.5 7B Instruct', 'meta-llama/Llama-2-7b-hf'); "
             "resolved fuzzily against the catalog (the models tool shows what it resolves to). "
             "Give this, params_b or config.",
    "params_b": "Parameter count in billions, for a model not in the catalog (a generic shape is assumed).",
    "config": "The model's config.json as JSON text, for a model not in the catalog (its exact shape is used).",
    "gpu": "A GPU name ('4090', 'A100 80GB', 'H100 SXM', 'RTX 3090'); resolved fuzzily (see the gpus tool).",
    "gpu_memory_gib": "Memory of one GPU in GiB, for a card not in the catalog.",
    "lora_targets": "LoRA target module names, e.g. ['q_proj', 'v_proj'] or ['all-linear'].",
}


def estimate_arguments(kb: KnowledgeBase) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for name, fact in INPUTS.items():
        spec = kb.facts[fact]
        schema = {"type": "string", "enum": list(spec.values)} if spec.type == "enum" else dict(_KINDS[spec.type])
        description = spec.text["en"] + (f" ({spec.unit})" if spec.unit else "")
        schema["description"] = f"{_HINTS[name]} [{description}]" if name in _HINTS else description
        properties[name] = schema
    properties["lang"] = LANG
    return {"type": "object", "properties": properties, "additionalProperties": False}


def arguments(kb: KnowledgeBase) -> dict[str, dict[str, Any]]:
    """Each tool's arguments."""
    message = {"type": "string", "minLength": 1,
               "description": "What the user has: a traceback, nvidia-smi / free -h / dmesg output, TrainingArguments, "
                              "a DeepSpeed JSON, an axolotl or LLaMA-Factory YAML, a launch command, a config.json, "
                              "or one sentence ('LLaMA-3-8B + LoRA + batch 4 on a 4090'). Paste it whole, unedited."}
    lookup = {"type": "object", "additionalProperties": False, "properties": {
        "query": {"type": "string", "maxLength": 200,
                  "description": "A name as the user wrote it; empty lists every id in the catalog."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5,
                  "description": "How many near names to return besides the match."},
        "lang": LANG}}
    return {
        "diagnose": {"type": "object", "required": ["text"], "additionalProperties": False,
                     "properties": {"text": message, "lang": LANG}},
        "consult": {"type": "object", "required": ["message"], "additionalProperties": False,
                    "properties": {"message": {**message, "description": message["description"]
                                               + " To answer a question, send the answer: an option's number, "
                                               "its label, a value, or 'skip'."},
                                   "consultation_id": CONSULTATION_ID, "lang": LANG}},
        "estimate": estimate_arguments(kb),
        "models": lookup,
        "gpus": lookup,
    }


_ESTIMATE = {"type": ["object", "null"], "description": "Memory per GPU and in host RAM, GiB, with its breakdown.",
             "properties": {"per_gpu_gib": {"type": "number"}, "host_ram_gib": {"type": "number"},
                            "gpu_capacity_gib": {"type": ["number", "null"]}, "fits": {"type": ["boolean", "null"]},
                            "breakdown": {"type": "object", "additionalProperties": {"type": "number"}}}}
_REPLY_PROPERTIES = {
    "status": {"type": "string", "enum": ["question", "report"]},
    "lang": {"type": "string", "enum": list(LANGUAGES)},
    "oom_kind": {"type": "string", "enum": ["gpu", "host", "not_memory", "unknown"],
                 "description": "What ran out: accelerator memory, host RAM, or not memory at all."},
    "diagnoses": {"type": "array", "description": "Causes, most likely first.", "items": {
        "type": "object", "required": ["id", "title", "confidence", "why"],
        "properties": {"id": {"type": "string"}, "title": {"type": "string"}, "confidence": {"type": "number"},
                       "why": {"type": "array", "items": {"type": "string"}}}}},
    "questions": {"type": "array", "description": "The one question to ask the user first, if any.", "items": {
        "type": "object", "required": ["id", "text", "why", "options"],
        "properties": {"id": {"type": "string"}, "text": {"type": "string"}, "why": {"type": "string"},
                       "options": {"type": "array", "items": {"type": "object", "required": ["value", "label"]}}}}},
    "estimate": _ESTIMATE,
    "remedies": {"type": "array", "description": "Ranked, each with the estimate after it and the exact change.",
                 "items": {"type": "object", "required": ["id", "title", "estimate_after_gib", "change"]}},
    "facts": {"type": "array", "items": {"type": "object", "required": ["name", "value"]}},
    "assumptions": {"type": "array", "items": {"type": "object"}},
}
REPLY = {"type": "object", "required": ["status", "lang", "oom_kind", "diagnoses", "questions", "estimate", "remedies"],
         "properties": _REPLY_PROPERTIES}


def _catalog(entry: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": ["query", "match", "candidates"], "properties": {
        "query": {"type": "string"},
        "match": {"anyOf": [{"type": "null"}, {**entry, "required": ["id", "score"]}],
                  "description": "The entry the estimator would use for this name (score 100 = exact name)."},
        "candidates": {"type": "array", "items": entry, "description": "Other entries with near names."},
        "catalog": {"type": "array", "items": {"type": "string"}, "description": "Every id, when no name was given."}}}


RESULTS: dict[str, dict[str, Any]] = {
    "diagnose": REPLY,
    "consult": {"type": "object", "required": ["consultation_id", "status", "reply"], "properties": {
        "consultation_id": {"type": "string", "description": "Pass it back with the user's answer."},
        "status": {"type": "string", "enum": ["question", "report"]},
        "reply": REPLY}},
    "estimate": {"type": "object", "required": ["lang", "estimate", "assumptions", "whatif"], "properties": {
        "lang": {"type": "string"}, "estimate": _ESTIMATE, "assumptions": {"type": "array"},
        "whatif": {"type": "array", "description": "Changes that lower the estimate, the fitting ones first.",
                   "items": {"type": "object", "required": ["remedy", "title", "estimate_after_gib"]}}}},
    "models": _catalog({"type": "object", "properties": {"id": {"type": "string"}, "params_b": {"type": "number"}}}),
    "gpus": _catalog({"type": "object", "properties": {"id": {"type": "string"}, "memory_gib": {"type": "number"}}}),
}
