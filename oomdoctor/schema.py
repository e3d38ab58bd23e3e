"""A small validator for the knowledge files, with errors that name file, entry and a fix.

Hand-written rather than jsonschema because the errors must say "did you mean"
and name the entry by its id, which is what a knowledge author needs.
"""
from __future__ import annotations

from typing import Any, Iterable

from rapidfuzz import process as rf_process

LANGUAGES = ("en", "zh")


class KnowledgeError(ValueError):
    """A knowledge or rule file is wrong; the message says where and how."""


def suggest(word: str, choices: Iterable[str], cutoff: float = 60.0) -> str:
    """`` (did you mean 'x'?)`` for the closest choice, or an empty string.  The one "did you mean" of every
    YAML file the project reads (the knowledge base and both catalogs)."""
    options = sorted(map(str, choices))
    hit = rf_process.extractOne(str(word), options, score_cutoff=cutoff) if options else None
    return f" (did you mean {hit[0]!r}?)" if hit else ""


class Field:
    def __init__(self, kind: str, required: bool = True, **options: Any) -> None:
        self.kind = kind
        self.required = required
        self.options = options


def check_entry(entry: Any, fields: dict[str, Field], where: str) -> dict:
    if not isinstance(entry, dict):
        raise KnowledgeError(f"{where}: expected a mapping, got {type(entry).__name__}")
    for key in entry:
        if key not in fields:
            raise KnowledgeError(f"{where}: unknown key '{key}'{suggest(key, fields)}")
    for key, spec in fields.items():
        if key not in entry or entry[key] is None:
            if spec.required:
                raise KnowledgeError(f"{where}: missing '{key}'")
            continue
        check_value(entry[key], spec, f"{where}: '{key}'")
    return entry


def check_value(value: Any, spec: Field, where: str) -> None:
    kind = spec.kind
    if kind == "text":
        check_text(value, where)
    elif kind == "str":
        if not isinstance(value, str) or not value.strip():
            raise KnowledgeError(f"{where}: must be a non-empty string")
    elif kind == "number":
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise KnowledgeError(f"{where}: must be a number")
    elif kind == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            raise KnowledgeError(f"{where}: must be an integer")
    elif kind == "bool":
        if not isinstance(value, bool):
            raise KnowledgeError(f"{where}: must be true or false")
    elif kind == "list":
        if not isinstance(value, list):
            raise KnowledgeError(f"{where}: must be a list")
    elif kind == "map":
        if not isinstance(value, dict):
            raise KnowledgeError(f"{where}: must be a mapping")
    elif kind == "enum":
        if value not in spec.options["values"]:
            raise KnowledgeError(f"{where}: '{value}' is not one of {list(spec.options['values'])}{suggest(value, spec.options['values'])}")
    elif kind == "any":
        pass
    else:  # pragma: no cover - a bug in a schema, not in a knowledge file
        raise AssertionError(kind)


def check_text(value: Any, where: str) -> None:
    if not isinstance(value, dict):
        raise KnowledgeError(f"{where}: must give the text in each of {list(LANGUAGES)}")
    missing = [lang for lang in LANGUAGES if not isinstance(value.get(lang), str) or not value[lang].strip()]
    if missing:
        raise KnowledgeError(f"{where}: missing translation {missing}")
    extra = [k for k in value if k not in LANGUAGES]
    if extra:
        raise KnowledgeError(f"{where}: unknown language {extra}{suggest(extra[0], LANGUAGES)}")


def check_ref(value: str, known: Iterable[str], what: str, where: str) -> None:
    known = set(known)
    if value not in known:
        raise KnowledgeError(f"{where}: unknown {what} '{value}'{suggest(value, known)}")
