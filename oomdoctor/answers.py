"""Reading an answer to the question just asked, in the user's own words.

The reader looks only for the asked fact; everything else the answer states is read by the
extractors, as in any message. It is judged by precision first: a token that merely holds
digits ("bf16", "A100", "3090s") is not a number, several candidate numbers are no answer,
and an answer that cannot be read is left unread (the question is asked once more).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .knowledge import KnowledgeBase, Question

# Facts counted in tokens, where "2k" means 2048 as people use it for lengths.
TOKEN_FACTS = {"train.seq_len", "gen.max_new_tokens"}
# Facts in GiB, where a number may carry its unit ("64GB", "360G").
SIZE_UNITS = {"g", "gb", "gib"}
MAX_ANSWER_CHARS = 2000

# A number standing alone: not inside a name (bf16, A100, v0.3, 3090s, 4-bit, 2.5-7b).
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.\-])(\d{1,9}(?:\.\d{1,4})?)(\s{0,2})([A-Za-z]{1,3})?(?![A-Za-z0-9_]|\.\d|-[A-Za-z0-9])")
# Only a count or a size may follow: 2k, 8x, 64GB; "tokens", "rows", "GPUs" are separate words.
_SUFFIXES = {"k", "x", *SIZE_UNITS}
_WORD_NUMBERS = {"one": 1, "single": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
                 "eight": 8, "nine": 9, "ten": 10, "twelve": 12, "sixteen": 16, "thirty-two": 32}
_WORD_NUMBER = re.compile(r"(?<![A-Za-z-])(" + "|".join(sorted(_WORD_NUMBERS, key=len, reverse=True)) + r")(?![A-Za-z-])", re.I)
# Chinese counts: 两张, 八卡, 单卡, 四块, 十六张.
_ZH_DIGITS = {"单": 1, "一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_ZH_NUMBER = re.compile(r"(十[一二三四五六七八九]?|[一二三四五六七八九]十[一二三四五六七八九]?|[单一两二三四五六七八九])\s{0,1}(?:张|块|台|个|卡|条|步|个?\s{0,1}worker)")
_CLAUSES = re.compile(r"[,;，；、\n]|(?<=[A-Za-z0-9)])\.(?=\s)|。|\band\b|\bbut\b|但是|并且")
# Yes and no in the words people use; a negation anywhere in the first clause wins ("not enabled"). Single
# characters count only where they cannot be part of another word: "开" answers at the start of a clause,
# not inside "一开始" (at once); "关" not inside "关于".
_NO = re.compile(r"\b(?:no|nope|nah|not|never|none|off|disabled?|false|without)\b|n't\b|"
                 r"没|不是|不开|不用|否|关了|关闭|关掉|未开|未启用|^不|^无", re.I)
_YES = re.compile(r"\b(?:yes|yep|yeah|yup|ya|sure|enabled?|true|correct|indeed|of\s{1,3}course)\b|"
                  r"\b(?:it'?s|is|was|turned|switched|set)\s{1,3}on\b|^on$|^it\s{1,3}(?:is|was)$|"
                  r"开了|开着|打开|开启|启用|是的|对的|有的|已开|^(?:是|对|嗯|好|有|开)", re.I)
_FILLER = re.compile(r"^(?:i\s{1,3}|sorry,?\s{1,3}|honestly,?\s{1,3}|um+,?\s{1,3}|我|其实|说实话|抱歉，?)", re.I)


@dataclass(frozen=True)
class Reading:
    """What an answer says about the asked fact: a value, an explicit "don't know", or nothing."""

    value: Any = None
    skipped: bool = False
    # The fact the value is for, when it is not the asked one (a size answering "which GPU?").
    fact: str | None = None


_OPTION_NUMBER = re.compile(r"[#(（]?\s{0,2}(\d{1,2})\s{0,2}[.)）、]?")


def option_by_number(question: Question, message: str) -> Any:
    """The value of option N when the reply is just "N" ("2", "#2", "2)", "２"), as chat channels
    show options numbered; None otherwise. Never for a question whose answer is a number, or that
    also asks a count, where "2" means two (the chat renderer does not number those options)."""
    if question.answer == "number" or question.or_count or not question.options:
        return None
    match = _OPTION_NUMBER.fullmatch(message.strip())
    if match is None:
        return None
    index = int(match.group(1))
    return question.options[index - 1]["value"] if 1 <= index <= len(question.options) else None


def read(question: Question, message: str, kb: KnowledgeBase, skip_words: set[str]) -> Reading:
    text = " ".join(message.strip()[:MAX_ANSWER_CHARS].split())
    first = _first_clause(text)
    spec = kb.facts[question.fact]
    if question.or_count and (count := _bare_count(text)) is not None and kb.facts[question.or_count].accepts(count):
        return Reading(count, fact=question.or_count)
    picked = option_by_number(question, text)
    if picked is not None and spec.accepts(picked):
        return Reading(picked)
    if question.answer == "boolean" or spec.type == "boolean":
        if _skips(first, skip_words):
            return Reading(skipped=True)
        return Reading(_polarity(first))
    value = _option(question, text)
    if value is None and question.fact == "model.name":
        value = _model_size_first(text)
    if value is None and question.answer == "number":
        value = _number(question.fact, text, kb)
    if value is None and question.answer == "choice" and any(o["value"] == "none" for o in question.options):
        # "no" to "does it offload?" is the option that says none.
        value = "none" if _polarity(first) is False and not _skips(first, skip_words) else None
    if value is not None and spec.accepts(value):
        return Reading(value)
    if question.or_size:
        size = _size(text)
        if size is not None and kb.facts[question.or_size].accepts(size):
            return Reading(size, fact=question.or_size)
    return Reading(skipped=_skips(first, skip_words))


_BARE_COUNT = re.compile(r"(?:x\s{0,2})?(\d{1,3})\s{0,2}[.!。]?")


def _bare_count(text: str) -> int | None:
    """A reply that is only a count ("2", "x2", "two"): what "(and how many)?" asks; a count said with
    its noun ("2 GPUs", "两张卡") is the extractors' to read, with the rest of the message."""
    text = text.strip().lower()
    if (match := _BARE_COUNT.fullmatch(text)) is not None:
        return int(match.group(1))
    return _WORD_NUMBERS.get(text.rstrip(".!。"))


def _size(text: str) -> float | None:
    """The one size the answer writes with its unit ("80G 的", "the 32GB one"); a bare number may be a count."""
    sizes = {float(m.group(1)) for m in _NUMBER.finditer(text) if (m.group(3) or "").lower() in SIZE_UNITS}
    return sizes.pop() if len(sizes) == 1 else None


def _first_clause(text: str) -> str:
    return _CLAUSES.split(text, maxsplit=1)[0].strip().lower()


def _skips(first: str, skip_words: set[str]) -> bool:
    """An explicit "don't know", at the start of the answer ("no idea, a colleague set it up")."""
    head = _FILLER.sub("", first.strip(" .!?。！？")).strip()
    for word in skip_words:
        if head == word or (head.startswith(word) and not head[len(word):len(word) + 1].isalnum()):
            return True
    return False


def _polarity(first: str) -> bool | None:
    if _NO.search(first):
        return False
    if _YES.search(first):
        return True
    return None


def _option(question: Question, text: str) -> Any:
    """An option named in the answer by its value or label: the whole answer, or one word of it."""
    lowered = text.lower().rstrip(".!。！")
    for option in question.options:
        labels = {str(option["value"]).lower(), *(label.lower() for label in option["label"].values())}
        if lowered in labels:
            return option["value"]
    if question.answer not in ("choice", "free"):
        return None
    found = {option["value"] for option in question.options
             if isinstance(option["value"], str) and len(option["value"]) > 2
             and re.search(r"(?<![A-Za-z0-9_-])" + re.escape(option["value"].lower()) + r"(?![A-Za-z0-9_-])", lowered)}
    return found.pop() if len(found) == 1 else None


_SIZE = re.compile(r"(?<![\w.])(\d{1,4}(?:\.\d)?)\s{0,1}[bB](?![\w.])")


def _model_size_first(text: str) -> str | None:
    """A model named size first ("a 7B Llama 2", "8B 的 llama3"): the catalog knows it size last."""
    from .catalog import find_model_mentions

    size = _SIZE.search(text)
    if size is None or find_model_mentions(text):
        return None
    rest = " ".join((text[:size.start()] + " " + text[size.end():]).split())
    found = find_model_mentions(f"{rest} {size.group(1)}B")
    return found[0][0] if found else None


def _number(fact: str, text: str, kb: KnowledgeBase) -> int | float | None:
    """The one number the answer gives for the asked fact.

    An answer may state several facts ("4096 tokens, micro-batch 2, checkpointing enabled"):
    a clause whose number another extractor claims for another fact ("micro-batch 2") is not
    this answer. Of what is left, exactly one number must remain.
    """
    from .observation import observe

    candidates = []
    for clause in _CLAUSES.split(text):
        clause = clause.strip()
        numbers = _numbers(fact, clause)
        if not numbers:
            continue
        found = observe(clause, kb)
        claimed = {o.name: o.value for o in found if isinstance(o.value, (int, float)) and not isinstance(o.value, bool)}
        # A number that is part of a name the extractors read ("one 3090") is not this answer.
        names = " ".join(o.detail for o in found if isinstance(o.value, str))
        numbers = [n for n in numbers if not re.search(r"(?<!\d)" + re.escape(str(n)) + r"(?!\d)", names)]
        # A number right before a card's name counts those cards ("8 A800 80G"): it answers no other question.
        if fact != "dist.num_gpus":
            numbers = [n for n in numbers if not _counts_cards(n, clause)]
        if fact in claimed:
            candidates.append(claimed[fact])
        elif not claimed:
            candidates.extend(numbers)
    distinct = set(candidates)
    if len(distinct) != 1:
        return None
    value = distinct.pop()
    spec = kb.facts[fact]
    if spec.type == "integer":
        return int(value) if float(value).is_integer() else None
    return value


def _counts_cards(number: int | float, clause: str) -> bool:
    from .extractors.gpu_count import CARD

    return re.search(r"(?<![\d.])" + re.escape(str(number)) + r"(?![\d.])\s{0,2}(?:[xX×*]\s{0,2})?(?:张|块)?\s{0,2}" + CARD,
                     clause) is not None


def _numbers(fact: str, clause: str) -> list[int | float]:
    out: list[int | float] = []
    for match in _NUMBER.finditer(clause):
        suffix = (match.group(3) or "").lower()
        if suffix and suffix not in _SUFFIXES:
            if not match.group(2):
                continue  # "16bit", "7b": one token, not a number
            suffix = ""  # "2 of them": the next word is not a unit
        if suffix in SIZE_UNITS and not fact.endswith("_gib"):
            continue
        number = float(match.group(1))
        if suffix == "k":
            number *= 1024 if fact in TOKEN_FACTS else 1000
        out.append(int(number) if number.is_integer() else number)
    out.extend(_WORD_NUMBERS[m.group(1).lower()] for m in _WORD_NUMBER.finditer(clause))
    out.extend(_zh_number(m.group(1)) for m in _ZH_NUMBER.finditer(clause))
    return out


def _zh_number(word: str) -> int:
    if "十" not in word:
        return _ZH_DIGITS[word]
    tens, _, units = word.partition("十")
    return (_ZH_DIGITS[tens] if tens else 1) * 10 + (_ZH_DIGITS[units] if units else 0)
