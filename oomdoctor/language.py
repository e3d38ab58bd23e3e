"""Which language a reply is in: the user's, unless they said otherwise.

A consultation keeps the language it started in. Chinese characters are always the
user's own words, so they decide; ASCII is not evidence of English on its own (logs,
model names and short answers such as "bf16", "2048", "yes" are ASCII for everyone).
A Chinese consultation turns English only when the user asks, or writes English
sentences rather than a log or a short answer.
"""
from __future__ import annotations

import re

LANGUAGES = ("en", "zh")

# Asking for a language in so many words.
_ASKS = (
    ("en", re.compile(r"\b(?:in|into|use|speak|switch\s{1,3}to)\s{1,3}english\b|\benglish\s{1,3}please\b|用英文|用英语|英文回复|英文回答", re.I)),
    ("zh", re.compile(r"\b(?:in|into|use|speak|switch\s{1,3}to)\s{1,3}chinese\b|用中文|说中文|中文回复|中文回答|切换(?:到|成)中文")),
)
_FUNCTION_WORDS = frozenset(
    "i i'm i've my me we our you your it it's its this that the a an is are was were be been am do does did "
    "have has had with on in of to for and but or not can could would should will please when after before "
    "so if then what how why there".split())
# A token a log or a config has and a sentence does not: code, paths, key=value, brackets.
_LOG_TOKEN = re.compile(r"[_=<>{}\[\]()/\\|;@#$`*]|::|\.py\b|:\S")
_WORD = re.compile(r"^[A-Za-z][A-Za-z'’-]*[,.!?:]?$")
PROSE_MIN_WORDS = 5
PROSE_MIN_FUNCTION_WORDS = 3


def _is_cjk(ch: str) -> bool:
    code = ord(ch)
    return 0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF or 0xF900 <= code <= 0xFAFF


def _cjk_count(text: str) -> int:
    return sum(1 for ch in text if _is_cjk(ch))


def detect(text: str, sample: int = 20_000) -> str | None:
    """'zh' when the user wrote Chinese, 'en' when they wrote words but no Chinese, None when unsure.

    Logs are English even for Chinese users, so a few Chinese characters among
    pages of traceback are the user's own words and decide the language.
    """
    head = text[:sample]
    if _cjk_count(head) >= 2:
        return "zh"
    if any(ch.isalpha() for ch in head):
        return "en"
    return None


def requested(text: str) -> str | None:
    """The language the user asks for in so many words ("in English please", "用中文回答")."""
    for lang, pattern in _ASKS:
        if pattern.search(text[:2000]):
            return lang
    return None


def _prose_line(line: str) -> bool:
    tokens = line.split()
    if any(_LOG_TOKEN.search(t) for t in tokens):
        return False
    words = [t.rstrip(",.!?:").lower() for t in tokens if _WORD.match(t)]
    function = sum(1 for w in words if w in _FUNCTION_WORDS)
    return len(words) >= PROSE_MIN_WORDS and function >= PROSE_MIN_FUNCTION_WORDS and len(words) >= 0.6 * len(tokens)


def writes_english(text: str, sample: int = 20_000) -> bool:
    """English sentences by the user, not a pasted log or a short answer: most lines read as prose."""
    head = text[:sample]
    if _cjk_count(head):
        return False
    lines = [line for line in head.splitlines() if line.strip()]
    prose = sum(1 for line in lines if _prose_line(line))
    return prose > 0 and prose * 2 >= len(lines)


def choose(explicit: str | None, text: str, previous: str | None) -> str:
    if explicit in LANGUAGES:
        return explicit
    asked = requested(text)
    if asked:
        return asked
    if previous not in LANGUAGES:
        return detect(text) or "en"
    if previous == "en":
        return "zh" if _cjk_count(text[:20_000]) >= 2 else "en"
    return "en" if writes_english(text) else "zh"
