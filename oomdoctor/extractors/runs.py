"""Which run a part of a message speaks of: the one that failed, one that worked, one from before or after.

People compare runs in one message: "单卡能跑，8 卡就 OOM", "DPO works fine, but PPO runs out of memory",
"后来换 5 张也一样". A reader that finds different values for one fact tells the failed run's apart with these
words, and otherwise leaves the fact open.
"""
from __future__ import annotations

import re

_I = re.IGNORECASE
SENTENCE_END = re.compile(r"[。！？!?;；\n]|\.(?=\s|$)")
CLAUSE_END = re.compile(r"[。！？!?;；\n，,]|\.(?=\s|$)|\bbut\b|但|可是", _I)
# A run that works or is done: "单卡能跑", "预训练跑完了", "with 2 GPUs it fits", "PPO works fine".
WORKS = re.compile(r"能跑|可以跑|能训练?|可以训练?|跑得起来|跑得动|跑起来了|没问题|正常|够用|就够|足够|跑完|做完|训完|完成了|结束了|"
                   r"\b(?:works?|worked|fits?|fitted|finished|completed|done)\b|\b(?:runs?|ran|trains?|trained|is|was|went)\s{1,3}fine\b|"
                   r"\bno\s{1,3}(?:problems?|issues?|oom)\b", _I)
FAILS = re.compile(r"oom|爆|不够|不足|溢出|out\s{1,3}of\s{1,3}memory|\bruns?\s{1,3}out\b|\bran\s{1,3}out\b|crash|\bfail|报错|"
                   r"\berror\b|\bkilled\b|挂了|重启", _I)
# A run from before or after the one asked about: "以前两张就够了", "后来换 5 张", "previously on 4 GPUs".
OTHER_RUN = re.compile(r"以前|之前|原来|原先|先前|上次|以往|后来|换|改用|\bpreviously\b|\bbefore\s{1,3}that\b|\bused\s{1,3}to\b|"
                       r"\blast\s{1,3}time\b|\bswitch(?:ed|ing)?\s{1,3}to\b|\b(?:then|also)\s{1,3}tried\b|\binstead\b", _I)


def around(text: str, pos: int, ends: re.Pattern, reach: int = 240) -> str:
    """The sentence (or clause) of `text` that holds `pos`, at most `reach` characters either side."""
    before = text[max(0, pos - reach):pos]
    last = None
    for last in ends.finditer(before):
        pass
    start = pos - len(before) + (last.end() if last else 0)
    after = ends.search(text, pos, pos + reach)
    return text[start: after.start() if after else min(len(text), pos + reach)]


def worked(part: str) -> bool:
    """Whether a clause says its run worked (and says no failure)."""
    return bool(WORKS.search(part)) and not FAILS.search(part)
