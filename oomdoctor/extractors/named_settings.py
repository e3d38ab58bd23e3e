"""A setting's own key in a sentence: "num_generations 4", "cutoff_len 改成 256", "gradient_accumulation_steps
is set to 8", "load_in_4bit 是 False", "per_device_train_batch_size 从 8 降到 2".

People name a setting by the key their config uses and give its value in words around it, in either language.
The grammar is one for every key knowledge/settings.yaml lists: the key (written as code, with an underscore),
an optional verb of setting or change (is / was / to / at / set to / 设 / 设成 / 设为 / 改成 / 调到 / 开到 / 用 / 是 /
为, or "from X to Y" / "从 X 改到 Y", whose second value is the one in use), then the value, which the setting's
own `read` interprets as a config reader would (`key=value` and `key: value` are config syntax, read by
config_keys with what surrounds them). Only values from a closed vocabulary are read here (numbers,
booleans, mapped words): a free string after a key in prose may be any word. A setting whose meaning depends on
other keys (`unless`) is left to the config readers, which see those keys. Of mentions that disagree, one in a
clause that says its run worked or was another run is set aside; if they still disagree the fact is left
unknown, for the later readers too. A key of higher rank (cutoff_len over max_length) decides as in a config.
"""
from __future__ import annotations

import re
from typing import Iterator

from . import Finding, runs, snippet, unknown
from .config_keys import _VLLM_ENGINE_KEYS, EMPTY, _index, distinct, read
from .sentence import _FROM_TO, prose

NAME = "named_settings"
PRODUCES: set[str] = set()  # from knowledge/settings.yaml, see produced_facts()

_I = re.IGNORECASE
_KEY = r"(?<![\w.$/-])([A-Za-z][A-Za-z0-9]{0,30}(?:_[A-Za-z0-9]{1,30}){1,6})(?![\w.-])"
_VERB = (r"[ \t]{0,3}(?:(?:is|was|of|at|to|为|是|设|设为|设成|设置为|设置成|设到|改成|改为|改到|调到|调成|调为|开到|用的是|用|"
         r"降到|减到|降为|加到|提到|提高到|增加到|拉到|(?:is[ \t]{1,3}|was[ \t]{1,3})?(?:set|changed|raised|lowered|reduced|increased)[ \t]{1,3}to)"
         r"[ \t]{0,3})?")
_VALUE = r"(\d{1,3}(?:,\d{3}){1,3}|\d{1,9}(?:\.\d{1,6})?[kK]?|[A-Za-z][A-Za-z0-9_]{0,30})(?![\w-]|\.\w)"
# A value offered as one of several or changed right after is not the one in use: "on or off", "4/8", "4 → 8", "4 改成 8".
_NOT_SETTLED = r"(?![ \t]{0,3}(?:/|\bor\b|还是|或|->|→|=>|改成|改到|改为|换成|调到|\bchanged\b|\bto\s{1,3}\d))"
_SETTING = re.compile(_KEY + r"(?:" + _FROM_TO + r"|" + _VERB + r")" + _VALUE + _NOT_SETTLED, _I)
# Values read here: those the setting's read turns from a closed vocabulary or a number into a fact value.
_CLOSED = ("integer", "number", "boolean")
_MAX_MENTIONS = 256


def _of_the_failed_run(text: str, mentions: list) -> list:
    """Of mentions that disagree, those not in a clause that says its run worked or was another one."""
    for keep in (lambda p: not runs.worked(runs.around(text, p, runs.CLAUSE_END)),
                 lambda p: not runs.OTHER_RUN.search(runs.around(text, p, runs.CLAUSE_END))):
        if len({m[1] for m in mentions}) <= 1:
            break
        mentions = [m for m in mentions if keep(m[3])] or mentions
    return mentions


def produced_facts(kb) -> set[str]:
    return {s["fact"] for s in kb.settings if _readable(s)}


def _readable(setting: dict) -> bool:
    spec = setting["read"]
    if setting.get("unless"):
        return False
    return spec in _CLOSED or isinstance(spec, dict) and ("map" in spec or "if_true" in spec or "if_false" in spec)


def extract(text: str, kb=None) -> Iterator[Finding]:
    if kb is None:
        from .. import knowledge
        kb = knowledge.default()
    text = prose(distinct(text))
    if "_" not in text:
        return
    index = _index(kb)
    vllm = "vllm" in text.lower()
    found: dict[str, list[tuple[int, object, str]]] = {}
    off: dict[str, set] = {}
    for n, m in enumerate(_SETTING.finditer(text)):
        if n >= _MAX_MENTIONS:
            break
        key = m.group(1).lower()
        if key in _VLLM_ENGINE_KEYS and vllm:
            continue  # a vLLM engine's parallelism is the rollout engine's, not the training job's
        for setting in index.get(key, ()):
            if not _readable(setting):
                continue
            raw = m.group(2)
            if re.fullmatch(r"\d{1,3}(?:,\d{3}){1,3}", raw):
                raw = raw.replace(",", "")
            value = read(setting["read"], raw, setting.get("min", 0))
            if value is EMPTY and isinstance(setting["read"], dict) and "if_true" in setting["read"]:
                off.setdefault(setting["fact"], set()).add(setting["read"]["if_true"])  # "load_in_4bit 是 False"
                continue
            if value is None or not isinstance(value, (int, float, str)) or isinstance(value, bool) and setting["read"] in ("integer", "number"):
                continue
            found.setdefault(setting["fact"], []).append((setting.get("rank", 0), value, snippet(text, m.start(), m.end()), m.start()))
    for fact, mentions in found.items():
        top = max(rank for rank, _, _, _ in mentions)
        mentions = _of_the_failed_run(text, [m for m in mentions if m[0] == top])
        values = {value for _, value, _, _ in mentions}
        if len(values) == 1 and not values & off.get(fact, set()):
            yield Finding(fact, values.pop(), mentions[0][2])
        elif len(values) > 1:
            # "per_device_train_batch_size 4 and 8": no one value, and no later reader may pick one
            yield Finding(fact, unknown(), "a sentence gives it different values")
    for fact, values in off.items():
        if fact not in found:
            yield Finding(fact, unknown(*values), "a sentence turns it off")
