"""Symptoms from knowledge/symptoms.yaml: literal phrases that show a known condition.

Phrases are matched case-insensitively as plain substrings, so a knowledge author
adds a symptom without writing a regular expression, and matching stays linear.
When several symptoms set the same fact, the one with the highest priority wins.
"""
from __future__ import annotations

from typing import Iterator

from . import Finding

NAME = "symptoms"
PRODUCES: set[str] = set()  # filled from the knowledge base: see produced_facts()


def produced_facts(kb) -> set[str]:
    return {name for symptom in kb.symptoms.values() for name in symptom.asserts}


def extract(text: str, kb=None) -> Iterator[Finding]:
    if kb is None:
        from .. import knowledge
        kb = knowledge.default()
    # Pad with newlines so a phrase like "\nkilled\n" also matches at either end.
    lowered = "\n" + text.lower() + "\n"
    best: dict[str, tuple[int, object, str]] = {}
    for symptom in kb.symptoms.values():
        hit = next((p for p in symptom.phrases if p in lowered), None)
        if hit is None:
            continue
        if any(r not in lowered for r in symptom.requires) or any(u in lowered for u in symptom.unless):
            continue
        for name, value in symptom.asserts.items():
            if name not in best or symptom.priority > best[name][0]:
                best[name] = (symptom.priority, value, f"{symptom.id}: “{hit}”")
    for name, (_, value, detail) in best.items():
        yield Finding(name, value, detail)
