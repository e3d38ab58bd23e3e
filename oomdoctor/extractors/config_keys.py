"""Configuration keys in any of the shapes people paste them.

One scanner reads `key=value`, `key: value`, `"key": value`, `--key value`,
`--key=value`, bare `--flag` and a launcher's argv list (`'--key', 'value'`);
knowledge/settings.yaml says which keys matter and which fact each sets.
"""
from __future__ import annotations

import math
import re
from typing import Any, Iterator

from ..knowledge import MAX_MAGNITUDE
from . import Finding, snippet

NAME = "config_keys"
PRODUCES: set[str] = set()  # from knowledge/settings.yaml, see produced_facts()

_VALUE = r"""(\[[^\]\n]{0,400}\]|"[^"\n]{0,200}"|'[^'\n]{0,200}'|[^\s,;()}\]'"]{1,200})"""
_ASSIGN = re.compile(r"""(?<![\w.-])["']?([A-Za-z_][A-Za-z0-9_]{0,60})["']?[ \t]{0,4}[:=][ \t]{0,4}""" + _VALUE)
# A flag's value never starts with "--": that is the next flag, and `--bf16` alone means true.
# A shell line continuation ("--do_eval \") is not a value either.
_FLAG = re.compile(r"(?<![\w-])--([A-Za-z_][A-Za-z0-9_]{0,60})(?:(?:[ \t]{1,4}|=)(?!--|\\)" + _VALUE + r")?")
# DeepSpeed's launcher and subprocess errors print argv as a Python list: ['--lora_r', '8', '--bf16', 'False'].
_ARGV = re.compile(r"""(?<![\w-])["']--([A-Za-z_][A-Za-z0-9_]{0,60})["'],[ \t]{0,4}["'](?!--)([^'"\n]{1,200})["']""")
# A YAML key whose value is an indented list on the next lines.
_BLOCK = re.compile(r"^([ \t]{0,8})([A-Za-z_][A-Za-z0-9_]{0,60}):[ \t]*\n((?:\1[ \t]{0,4}-[ \t]{1,4}[^\n]{1,120}\n?){1,64})", re.MULTILINE)

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off", "none", "null"}


def produced_facts(kb) -> set[str]:
    return {s["fact"] for s in kb.settings}


def _strip(raw: str) -> str:
    return raw.strip().strip("'\"").strip()


def _as_list(raw: str) -> list[str]:
    raw = raw.strip()
    if raw.startswith("[") and raw.endswith("]"):
        raw = raw[1:-1]
    items = [_strip(part) for part in re.split(r"[,\s]+", raw)]
    return [item for item in items if item]


def read(spec: Any, raw: str) -> Any:
    """The fact value a raw setting means, or None if it means nothing we track."""
    text = _strip(raw)
    low = text.lower()
    if spec in ("integer", "number"):
        try:
            number = float(text)
        except ValueError:
            return None
        if not math.isfinite(number) or abs(number) > MAX_MAGNITUDE:
            return None  # "1e400", "inf", "nan", "1e308" set nothing
        return int(number) if spec == "integer" else number
    if spec == "boolean":
        return True if low in _TRUE else False if low in _FALSE else None
    if spec == "string":
        return text or None
    if spec == "present":
        return low not in ("none", "null", "")
    if spec == "list":
        return _as_list(raw) or None
    if isinstance(spec, dict):
        if "if_true" in spec:
            return spec["if_true"] if low in _TRUE else None
        if "if_false" in spec:
            return spec["if_false"] if low in _FALSE else None
        mapping = spec["map"]
        for key, value in mapping.items():
            if str(key).lower() == low:
                return value
    return None


def _index(kb) -> dict[str, list[dict]]:
    cached = getattr(kb, "_settings_index", None)
    if cached is None:
        cached = {}
        for setting in kb.settings:
            for key in setting["keys"]:
                cached.setdefault(key.lower(), []).append(setting)
        kb._settings_index = cached
    return cached


def extract(text: str, kb=None) -> Iterator[Finding]:
    if kb is None:
        from .. import knowledge
        kb = knowledge.default()
    index = _index(kb)
    seen: set[str] = set()

    def emit(key: str, raw: str, start: int, end: int) -> Iterator[Finding]:
        for setting in index.get(key.lower(), ()):
            if setting["fact"] in seen:
                continue
            value = read(setting["read"], raw)
            if value is not None:
                seen.add(setting["fact"])
                yield Finding(setting["fact"], value, snippet(text, start, end))

    matches = []
    for m in _ASSIGN.finditer(text):
        matches.append((m.start(), m.group(1), m.group(2), m.end()))
    argv = set()
    for m in _ARGV.finditer(text):
        matches.append((m.start(), m.group(1), m.group(2), m.end()))
        argv.add(m.start() + 1)
    for m in _FLAG.finditer(text):
        if m.start() in argv:
            continue  # the same flag, already read with its value from the argv list
        value = m.group(2) if m.group(2) is not None else "true"
        matches.append((m.start(), m.group(1), value, m.end()))
    for m in _BLOCK.finditer(text):
        items = [line.strip()[1:].strip() for line in m.group(3).splitlines() if line.strip()]
        matches.append((m.start(), m.group(2), "[" + ",".join(items) + "]", m.end()))
    for start, key, raw, end in sorted(matches):
        yield from emit(key, raw, start, end)
