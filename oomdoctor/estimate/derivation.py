"""The estimate's derivation as keyed lines, worded in the reader's language where the estimate is rendered.

A line is a key of ``knowledge/texts.yaml`` (``derive.*``, or an existing key
such as ``part.weights`` or ``moment.optimizer_step``) and the numbers it shows.
A parameter may itself be a line (a clause worded in the same language) or a
list of lines (joined); plain numbers are formatted by the text's own format
spec (``{gib:.2f}``), so the figures stay numbers in JSON.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PREFIX = "derive."


@dataclass(frozen=True)
class Line:
    key: str
    params: dict[str, Any] = field(default_factory=dict)


def line(key: str, **params: Any) -> Line:
    """A derivation line keyed ``derive.<key>``."""
    return Line(PREFIX + key, params)


def text(key: str) -> Line:
    """Another text of the knowledge base used as a clause (a part's or a moment's name)."""
    return Line(key)

