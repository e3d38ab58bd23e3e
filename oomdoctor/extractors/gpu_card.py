"""Which GPU the job runs on, and its memory when the paste states it.

Cards are named in many shapes: "A100-SXM4-80GB" in an environment dump, "8xA100(40G)",
"A100s (40G)", "2 x 40GB A100s", "8 32GB v100 gpus", "RTX 4070Ti 12GB", "A6000 Ada",
"4张L20(45G)", "8卡3090". A size written beside a catalog card picks the variant ("V100 32GB" is
never the 16 GB card); a size a little under the card's (the "45G" of an L20) is kept as what the
user has. A card the catalog does not know (an Ascend 910B, a GTX 1080 Ti) gives its stated
memory instead of a guessed name, as does a size said of the GPUs alone ("8 80GB GPUs",
"24G显存"). Different cards in one paste, or cards named only in commented-out lines, leave the
name unknown.
"""
from __future__ import annotations

import functools
import re
from typing import Iterator

from . import Finding, snippet, unknown

NAME = "gpu_card"
PRODUCES = {"gpu.name", "gpu.memory_gib", "model.params_b"}

_MAX_LINES = 2000
# A name whose size the catalog had to guess (catalog.gpus.VARIANT_SIZE_GUESSED) is left unknown when its variants
# differ by more than a quarter (A100 40/80 GB, V100 16/32 GB), and read as the default when they are close
# (H100: 80 GB SXM and PCIe, 94 GB NVL).
SIZES_FAR_APART = 1.25
_LINE_CHARS = 4000
# Sizes said of the GPUs themselves, not of a model, a job or a total.
_SIZE = r"(\d{1,3}(?:\.\d{1,2})?)\s?(?:GB|GiB|Gb|gb|G|g)(?![A-Za-z0-9])"
_FREE_SIZES = [
    re.compile(_SIZE + r"\s?(?:of\s)?(?:显存|VRAM|vram|GPU memory|gpu memory|GPUs?|gpus?|graphics cards?|cards?|显卡|卡)"),
    re.compile(r"(?:GPUs?|gpus?|显卡|卡)\s?[/(（]\s?" + _SIZE),
    # "卡是 24G 的", "显卡都是 48G", "24G 的卡"
    re.compile(r"(?:显卡|卡)\s?(?:都)?(?:是|为)\s?" + _SIZE),
    re.compile(_SIZE + r"\s?的\s?(?:显卡|卡|GPU)"),
    # "显存 24G", "VRAM: 24GB", "显存是 48G": the card's memory, not an amount in use ("显存 70G 左右", "显存 20G 就爆了")
    re.compile(r"(?:显存|VRAM|vram)\s?(?:是|为|有|:|：)?\s?" + _SIZE + r"(?!\s{0,2}(?:左右|多|以上|上下|就|时|的时候|出头|不到|around|or\s|used|in\s))"),
    re.compile(r"total_memory:\s?" + _SIZE),
]
# llamafactory-cli env: "GPU memory: 79.15GB", what PyTorch reports (GiB).
_MEASURED = re.compile(r"GPU memory:\s?(\d{1,3}(?:\.\d{1,2})?)\s?GB")
_NOT_THE_CARD = re.compile(r"(?:total|in all|共|总|need|needs|require|requires|only|uses?|used|using|占用|需要|需|要|peak|峰值|"
                           r"of which|allocated|reserved|free|剩余|up to|about|around|~|≈)\W{0,3}$", re.IGNORECASE)
_TOTAL_AFTER = re.compile(r"^\W{0,3}(?:total|in total|in all|combined)", re.IGNORECASE)
# Huawei Ascend NPUs: not in the catalog, and their "910B" is not a model with 910 billion parameters.
_NPU = re.compile(r"(?:Ascend|昇腾)\s?910[A-C]?\d?|(?<![\w.])910[A-C]\d?(?![\w])")
_NPU_SIZE = re.compile(r"\s{0,2}[(（]?\s{0,2}" + _SIZE)
# Consumer cards named by their number: "在4090上", "8卡3090", "(3090, each with 24gb".
_NUMBER_CARD = re.compile(r"(?<!\d)[2-5]0[5-9]0(?!\d)")
_CARD_WORD = re.compile(r"卡|张|块|在|用|上|gpu|card|vram|显存|nvidia|geforce|rtx", re.IGNORECASE)


@functools.lru_cache(maxsize=1)
def _card_words() -> tuple[str, ...]:
    from ..catalog import all_gpus

    words = set()
    for gpu in all_gpus():
        for name in (gpu.id, *gpu.names):
            word = re.match(r"[^\s\-_/]+", name.lower())
            if word and not word.group(0)[:1].isdigit() and len(word.group(0)) >= 2:
                words.add(word.group(0))
    return tuple(sorted(words))


def _lines(text: str) -> list[tuple[int, str]]:
    """(offset, line) for the lines that may name a card: found with str.find, cheap on a 10 MiB log."""
    lowered = text.lower()
    starts: set[int] = set()
    for word in _card_words() + ("910",):
        pos = lowered.find(word)
        while pos >= 0 and len(starts) < _MAX_LINES:
            starts.add(text.rfind("\n", 0, pos) + 1)
            end = text.find("\n", pos)
            pos = lowered.find(word, len(text) if end < 0 else end)
    for m in _NUMBER_CARD.finditer(text):
        start = text.rfind("\n", 0, m.start()) + 1
        end = text.find("\n", m.end())
        if _CARD_WORD.search(text[start: len(text) if end < 0 else end][:_LINE_CHARS]):
            starts.add(start)
        if len(starts) >= _MAX_LINES:
            break
    out, seen = [], set()
    for start in sorted(starts):
        end = text.find("\n", start)
        line = text[start: len(text) if end < 0 else end][:_LINE_CHARS]
        if line not in seen:
            seen.add(line)
            out.append((start, line))
    return out


# A consumer card's number in the plural: "4 RTX 3090s", "two 4090s", "RTX 2080 Tis" (the catalog knows the singular;
# "the 1990s" is no card: only a card's number, after RTX/GTX/GeForce or a count).
_PLURAL_NUMBER = re.compile(r"((?:(?:RTX|GTX|GeForce)[ \t]?|(?<![\w.])(?:\d{1,3}|two|three|four|six|eight)[ \t]{1,2}(?:x[ \t]?)?)"
                            r"[2-5]0[5-9]0(?:[ \t]?Ti)?)s(?![\w-])", re.IGNORECASE)


def _mentions(text: str) -> list:
    from ..catalog import find_gpus_in_text

    found = []
    for start, line in _lines(text):
        line = _PLURAL_NUMBER.sub(lambda m: m.group(1) + " ", line)  # same length: offsets stay right
        for m in find_gpus_in_text(line):
            found.append((start + m.start, start + m.end, m))
    return found


def _family(gpu_id: str) -> str:
    return re.sub(r"-(?:\d{1,3}gb|sxm|pcie|nvl)", "", gpu_id)


@functools.lru_cache(maxsize=256)
def _memory_spread(family: str) -> float:
    """Largest over smallest memory among the catalog's cards of one family."""
    from ..catalog import all_gpus

    sizes = [g.memory_mib for g in all_gpus() if _family(g.id) == family]
    return max(sizes) / min(sizes) if sizes else 1.0


def _free_sizes(text: str, taken: list[tuple[int, int]]) -> list[tuple[float, str]]:
    sizes = []
    for pattern in _FREE_SIZES:
        for m in pattern.finditer(text):
            if any(a - 12 <= m.start() <= b + 12 for a, b in taken):
                continue  # the size of a named card, already weighed with it
            if _NOT_THE_CARD.search(text[max(0, m.start() - 16): m.start()]) or _TOTAL_AFTER.search(text[m.end(): m.end() + 16]):
                continue
            sizes.append((float(m.group(1)), m.group(0)))
    return sizes


def extract(text: str) -> Iterator[Finding]:
    from ..catalog.gpus import VARIANT_SIZE_GUESSED
    from .config_keys import _uncomment, distinct

    text = distinct(text)
    clean = _uncomment(text)
    mentions = _mentions(clean)
    npus = list(_NPU.finditer(clean))
    for npu in npus:
        if re.search(r"910B", npu.group(0)):
            yield Finding("model.params_b", unknown(910.0), f"{npu.group(0)} is an Ascend NPU")
            break

    name = None
    if mentions or npus:
        strong = [m for _, _, m in mentions if m.score >= 90]
        weak = [m for _, _, m in mentions if m.score < 90]
        ids = {m.gpu.id for m in strong} or {m.gpu.id for m in weak}
        families = {_family(m.gpu.id) for _, _, m in mentions}
        if npus or len(ids) != 1 or len(families) != 1:
            detail = ", ".join(sorted({m.text for _, _, m in mentions} | {n.group(0) for n in npus}))[:120]
            yield Finding("gpu.name", unknown(), f"the paste names different or unknown cards: {detail}")
        else:
            first = (strong or weak)[0]
            if first.score <= VARIANT_SIZE_GUESSED and _memory_spread(_family(first.gpu.id)) > SIZES_FAR_APART:
                # "A100" alone: the 40 GB and the 80 GB card are both A100s, and the catalog's default would halve
                # or double every verdict. Left unknown, so a stated size or a question settles it.
                yield Finding("gpu.name", unknown(), f"{first.text}: the card comes with different memory sizes")
            else:
                name = first.gpu
                yield Finding("gpu.name", name.id, first.text)
    elif _mentions(text):
        yield Finding("gpu.name", unknown(), "a card is named only in commented-out lines")

    measured = _MEASURED.search(clean)
    if measured:
        yield Finding("gpu.memory_gib", float(measured.group(1)), measured.group(0))
        return
    stated: list[tuple[float, str]] = []
    for _, _, m in mentions:
        if m.stated_gib is not None and abs(m.stated_gib - m.gpu.memory_gb_marketing) >= 0.5:
            stated.append((m.stated_gib, m.text))
    for npu in npus:
        size = _NPU_SIZE.match(clean, npu.end())
        if size:
            stated.append((float(size.group(1)), snippet(clean, npu.start(), size.end())))
    for size, where in _free_sizes(clean, [(a, b) for a, b, _ in mentions] + [(n.start(), n.end() + 8) for n in npus]):
        if name is None or abs(size - name.memory_gb_marketing) >= 0.5:
            stated.append((size, where))
    sizes = {round(size, 2) for size, _ in stated}
    if len(sizes) == 1:
        yield Finding("gpu.memory_gib", sizes.pop(), stated[0][1])
    elif len(sizes) > 1:
        yield Finding("gpu.memory_gib", unknown(), "the paste gives different GPU sizes")
