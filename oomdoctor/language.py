"""Which language a reply is in: the user's, unless they said otherwise."""
from __future__ import annotations

LANGUAGES = ("en", "zh")


def _is_cjk(ch: str) -> bool:
    code = ord(ch)
    return 0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF or 0xF900 <= code <= 0xFAFF


def detect(text: str, sample: int = 20_000) -> str | None:
    """'zh' when the user wrote Chinese, 'en' when they wrote words but no Chinese, None when unsure.

    Logs are English even for Chinese users, so a few Chinese characters among
    pages of traceback are the user's own words and decide the language.
    """
    head = text[:sample]
    cjk = sum(1 for ch in head if _is_cjk(ch))
    if cjk >= 2:
        return "zh"
    if any(ch.isalpha() for ch in head):
        return "en"
    return None


def choose(explicit: str | None, text: str, previous: str | None) -> str:
    if explicit in LANGUAGES:
        return explicit
    return detect(text) or previous or "en"
