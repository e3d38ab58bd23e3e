"""Accelerator catalog (``knowledge/gpus.yaml``) and GPU-name resolution.

``resolve_gpu`` understands what people type ("4090", "a100 40g", "3090ti",
"v100-32g") and what ``nvidia-smi`` prints ("NVIDIA A100-SXM4-40GB", "Tesla
V100-SXM2-32GB", "NVIDIA GeForce RTX 4090 D").  A name is reduced to core tokens
(model number plus suffixes like ti/super/d/ada/nvl), a form factor (sxm/pcie)
and a memory size; the core must match exactly, so a 4090 never becomes a 4090 D
and an A10 never an A10G.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from .. import yaml_safe
from .models import KNOWLEDGE_DIR, CatalogError, did_you_mean

__all__ = [
    "GPU",
    "GpuMention",
    "SmiGpu",
    "DEFAULT_GPUS_PATH",
    "load_gpus",
    "get_gpu",
    "all_gpus",
    "resolve_gpu",
    "resolve_gpu_scored",
    "find_gpus_in_text",
    "parse_nvidia_smi_name",
    "parse_nvidia_smi",
]

DEFAULT_GPUS_PATH = KNOWLEDGE_DIR / "gpus.yaml"
TIERS = ("consumer", "workstation", "datacenter", "apple")
MEMORY_SOURCES = ("nvidia-smi", "datasheet")


@dataclass(frozen=True)
class GPU:
    id: str
    tier: str
    vendor: str
    names: tuple[str, ...]
    arch: str
    memory_mib: int
    memory_gb_marketing: int
    memory_source: str
    bf16: bool
    fp8: bool
    source: str
    default: bool = False
    notes: str = ""

    @property
    def memory_gib(self) -> float:
        return self.memory_mib / 1024

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * 1024 * 1024

    @property
    def unified_memory(self) -> bool:
        return self.tier == "apple"


_REQUIRED: dict[str, type] = {
    "id": str, "tier": str, "vendor": str, "names": list, "arch": str, "memory_mib": int,
    "memory_gb_marketing": int, "memory_source": str, "bf16": bool, "fp8": bool, "source": str,
}
_OPTIONAL: dict[str, type] = {"default": bool, "notes": str}


def _entry(path: str, idx: int, e: Any) -> GPU:
    if not isinstance(e, Mapping):
        raise CatalogError(f"{path}: entry #{idx} must be a mapping, got {type(e).__name__}")
    ident = e.get("id") if isinstance(e.get("id"), str) else f"#{idx}"
    where = f"{path}: gpu {ident!r}"
    allowed = {**_REQUIRED, **_OPTIONAL}
    for k in e:
        if k not in allowed:
            raise CatalogError(f"{where}: unknown key {k!r}{did_you_mean(str(k), allowed)}")
    for k in _REQUIRED:
        if k not in e:
            raise CatalogError(f"{where}: missing required key {k!r}")
    for k, v in e.items():
        t = allowed[k]
        if not isinstance(v, t) or (t is int and isinstance(v, bool)):
            raise CatalogError(f"{where}: key {k!r} must be {t.__name__}, got {type(v).__name__} {v!r}")
    if e["tier"] not in TIERS:
        raise CatalogError(f"{where}: tier must be one of {TIERS}{did_you_mean(e['tier'], TIERS)}")
    if e["memory_source"] not in MEMORY_SOURCES:
        raise CatalogError(f"{where}: memory_source must be one of {MEMORY_SOURCES}"
                           f"{did_you_mean(e['memory_source'], MEMORY_SOURCES)}")
    if e["memory_mib"] <= 0 or e["memory_gb_marketing"] <= 0:
        raise CatalogError(f"{where}: memory must be positive")
    if not e["names"] or not all(isinstance(n, str) and n.strip() for n in e["names"]):
        raise CatalogError(f"{where}: 'names' must be a non-empty list of strings")
    kw = dict(e)
    kw["names"] = tuple(e["names"])
    return GPU(**kw)


def parse_gpus(data: Any, path: str = "<gpus.yaml>") -> dict[str, GPU]:
    if not isinstance(data, Mapping) or "gpus" not in data:
        raise CatalogError(f"{path}: top level must be a mapping with a 'gpus' list")
    extra = [k for k in data if k != "gpus"]
    if extra:
        raise CatalogError(f"{path}: unknown top-level key {extra[0]!r}{did_you_mean(str(extra[0]), ['gpus'])}")
    if not isinstance(data["gpus"], list) or not data["gpus"]:
        raise CatalogError(f"{path}: 'gpus' must be a non-empty list")
    out: dict[str, GPU] = {}
    owner: dict[tuple, str] = {}
    for i, e in enumerate(data["gpus"]):
        gpu = _entry(path, i, e)
        if gpu.id in out:
            raise CatalogError(f"{path}: gpu {gpu.id!r}: duplicate id")
        out[gpu.id] = gpu
        for name in (gpu.id, *gpu.names):
            key = _key(_gpu_tokens(name))
            if key[0] and owner.get(key, gpu.id) != gpu.id:
                raise CatalogError(f"{path}: gpu {gpu.id!r}: name {name!r} already names gpu {owner[key]!r}")
            owner[key] = gpu.id
    return out


@functools.lru_cache(maxsize=8)
def _load_cached(path: str, mtime: float) -> dict[str, GPU]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml_safe.load(fh)
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path}: invalid YAML: {exc}") from None
    return parse_gpus(data, path)


def load_gpus(path: str | os.PathLike[str] | None = None) -> dict[str, GPU]:
    p = Path(path) if path is not None else DEFAULT_GPUS_PATH
    try:
        mtime = p.stat().st_mtime
    except FileNotFoundError:
        raise CatalogError(f"{p}: file not found") from None
    return dict(_load_cached(str(p), mtime))


def all_gpus(path: str | os.PathLike[str] | None = None) -> list[GPU]:
    return list(load_gpus(path).values())


def get_gpu(gpu_id: str, path: str | os.PathLike[str] | None = None) -> GPU:
    gpus = load_gpus(path)
    try:
        return gpus[gpu_id]
    except KeyError:
        raise KeyError(f"no GPU {gpu_id!r} in the catalog{did_you_mean(gpu_id, gpus)}") from None


# ---------------------------------------------------------------------- tokenising
_GPU_TOKEN_RE = re.compile(
    r"\d+(?:\.\d+)?\s?(?:gb|gib|g)(?![a-z0-9])"   # memory: 80gb, 40g, 24 GB
    r"|(?<![a-z0-9.])\d{1,3}(?=[a-z]{1,3}\d{2,4}(?![a-z0-9]))"  # the count in "8h100": its own token
    r"|[a-z]+\d+[a-z]*"                          # a100, h100, t4, l40s, a10g, mi300x, sxm4, rtx4090
    r"|\d+[a-z]*"                                # 4090, 4090d, 3090ti
    r"|[a-z]+"
)
_NOISE = frozenset({
    "nvidia", "geforce", "tesla", "quadro", "rtx", "gtx", "graphics", "card", "cards", "gpu", "gpus",
    "generation", "gen", "hbm", "hbm2", "hbm2e", "hbm3", "hbm3e", "gddr6", "gddr6x", "gddr7", "amd",
    "instinct", "intel", "apple", "the", "a", "an", "on", "with", "x", "and", "of", "vram", "memory",
    "mem", "dgx", "hgx", "laptop", "mobile", "desktop", "founders", "edition", "fe", "oc",
})
_VENDOR_WORDS = frozenset({"nvidia", "geforce", "tesla", "quadro", "rtx", "gtx", "amd", "instinct", "intel", "apple"})
_FORM = {"sxm": "sxm", "sxm2": "sxm", "sxm4": "sxm", "sxm5": "sxm", "pcie": "pcie", "pci": "pcie"}
_SUFFIXES = ("super", "ti", "tis", "d")


def _split_number_suffix(tok: str) -> list[str]:
    m = re.fullmatch(r"(\d+)([a-z]+)", tok)
    if not m:
        return [tok]
    num, suf = m.groups()
    if suf == "tis":
        return [num, "ti", "super"]
    if suf in _SUFFIXES:
        return [num, suf]
    return [tok]


@dataclass(frozen=True)
class _GTok:
    text: str
    start: int
    end: int


def _gpu_tokens_spans(text: str) -> list[_GTok]:
    low = text.lower()
    out: list[_GTok] = []
    for m in _GPU_TOKEN_RE.finditer(low):
        tok = m.group(0)
        tok = re.sub(r"^(?:rtx|gtx)(?=\d)", "", tok)
        for part in _split_number_suffix(tok):
            out.append(_GTok(part.replace(" ", ""), m.start(), m.end()))
    return out


def _gpu_tokens(text: str) -> list[str]:
    return [t.text for t in _gpu_tokens_spans(text)]


_MEM_RE = re.compile(r"^(\d+(?:\.\d+)?)(?:gb|gib|g)$")


def _key(tokens: Iterable[str]) -> tuple[frozenset[str], frozenset[str], int | None]:
    core: set[str] = set()
    form: set[str] = set()
    mem: int | None = None
    for t in tokens:
        if t in _NOISE:
            continue
        m = _MEM_RE.match(t)
        if m:
            mem = int(float(m.group(1)))
        elif t in _FORM:
            form.add(_FORM[t])
        else:
            core.add(t)
    return frozenset(core), frozenset(form), mem


class _GpuIndex:
    def __init__(self, gpus: Iterable[GPU]):
        self.by_core: dict[frozenset[str], list[tuple[tuple, GPU, str]]] = {}
        for g in gpus:
            for name in (g.id, *g.names):
                k = _key(_gpu_tokens(name))
                if k[0]:
                    self.by_core.setdefault(k[0], []).append((k, g, name))


_GIDX: dict[tuple[int, ...], _GpuIndex] = {}


def _gindex(gpus: dict[str, GPU] | None) -> _GpuIndex:
    if gpus is None:
        gpus = load_gpus()
    ident = tuple(id(g) for g in gpus.values())
    idx = _GIDX.get(ident)
    if idx is None:
        if len(_GIDX) > 16:
            _GIDX.clear()
        idx = _GIDX[ident] = _GpuIndex(gpus.values())
    return idx


def _match_key(idx: _GpuIndex, key: tuple[frozenset[str], frozenset[str], int | None]
               ) -> tuple[GPU | None, float, str]:
    core, form, mem = key
    cands = idx.by_core.get(core)
    if not cands:
        return None, 0.0, ""
    # exact alias (core + form + memory as written)
    for k, g, name in cands:
        if k == key:
            return g, 100.0, name
    pool = cands
    if mem is not None:
        pool = [c for c in cands if (c[0][2] == mem) or (c[0][2] is None and c[1].memory_gb_marketing == mem)]
        if not pool:
            apple = [c for c in cands if c[1].tier == "apple"]
            if apple:  # unified memory comes in several sizes: keep the chip, use the stated size
                g = apple[0][1]
                sized = dataclasses.replace(g, id=f"{g.id.rsplit('-', 1)[0]}-{mem}gb", memory_mib=mem * 1024,
                                            memory_gb_marketing=mem, memory_source="datasheet")
                return sized, 90.0, apple[0][2]
            return None, 50.0, ""
    if form:
        same_form = [c for c in pool if c[0][1] == form]
        if same_form:
            pool = same_form
    distinct = {c[1].id: c for c in pool}
    if len(distinct) == 1:
        _, g, name = next(iter(distinct.values()))
        return g, 95.0, name
    defaults = sorted((c for c in distinct.values() if c[1].default), key=lambda c: -c[1].memory_mib)
    if defaults:
        _, g, name = defaults[0]  # several defaults (A100 40/80 GB SXM): the larger, more common today
        same_memory = len({c[1].memory_mib for c in distinct.values()}) == 1
        return g, 90.0 if same_memory else VARIANT_SIZE_GUESSED, name
    _, g, name = sorted(distinct.values(), key=lambda c: c[1].id)[0]
    return g, 70.0, name


# The score of a name that fits cards of different memory, read as the default one (a bare "A100": 40 or 80 GB).
VARIANT_SIZE_GUESSED = 75.0

def resolve_gpu(text: str, gpus: dict[str, GPU] | None = None) -> GPU | None:
    """The catalog GPU a name (typed, or an ``nvidia-smi`` line) refers to, or ``None``."""
    return resolve_gpu_scored(text, gpus)[0]


def resolve_gpu_scored(text: str, gpus: dict[str, GPU] | None = None) -> tuple[GPU | None, float, str]:
    """``(gpu, score, matched name)``.  100 = exact name, 95 = unique, 90/75 = a default
    variant was assumed (75 when the variants differ in memory, e.g. a bare "A100")."""
    if not isinstance(text, str) or not text.strip():
        return None, 0.0, ""
    smi = parse_nvidia_smi_name(text)
    name = smi if smi else text
    idx = _gindex(gpus)
    key = _key(_gpu_tokens(name))
    hit = _match_key(idx, key)
    if hit[0] is not None or key[0] in idx.by_core:
        return hit  # found, or the card is known but the stated memory does not exist
    mentions = find_gpus_in_text(text, gpus)
    if mentions:
        m = mentions[0]
        return m.gpu, min(m.score, 90.0), m.alias
    return None, hit[1], ""


@dataclass(frozen=True)
class GpuMention:
    gpu: GPU
    text: str
    start: int
    end: int
    alias: str
    score: float
    count: int = 1   # "8x A100", "2×4090"
    stated_gib: float | None = None   # the size written beside the name: "L20(45G)", "32GB V100"


_COUNT_BEFORE_RE = re.compile(r"(\d{1,3})\s*(?:x|×|\*)\s*$", re.IGNORECASE)
_COUNT_CARDS_RE = re.compile(r"(\d{1,3}|[一二两三四五六七八九十])\s*(?:张|块|卡|台)\s*$")
_CN_NUM = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10}


# A card's usable memory is a little under its marketing size ("L20(45G)", "A100 39.5G"): a stated size this
# close to the card's names the card, and is kept as what the user has.
_NEAR_SIZE = 0.85


def _plural(tok: str) -> str | None:
    """"a100s" -> "a100": a plural of a card name (but "l40s" is a card of its own)."""
    return tok[:-1] if re.fullmatch(r"[a-z]{1,6}\d{2,4}s", tok) else None


def _near(gpu: GPU, stated: float) -> bool:
    return _NEAR_SIZE * gpu.memory_gb_marketing <= stated <= gpu.memory_gb_marketing


def find_gpus_in_text(text: str, gpus: dict[str, GPU] | None = None, max_window: int = 5) -> list[GpuMention]:
    """GPUs named in free text, in order; linear in ``len(text)``."""
    if not isinstance(text, str) or not text:
        return []
    idx = _gindex(gpus)
    # "8xA100", "2×4090", "8*H100": the count is not part of the name (same length, offsets kept).
    scan = re.sub(r"(?<=\d)[x×*](?=[A-Za-z0-9])", " ", text)
    toks = _gpu_tokens_spans(scan)
    n = len(toks)
    out: list[GpuMention] = []
    i = 0

    def close(a: _GTok, b: _GTok) -> bool:
        return b.start - a.end <= 3 and "\n" not in scan[a.end:b.start]

    def names(window: list[_GTok]) -> list[str]:
        texts = [t.text for t in window]
        if _match_key(idx, _key(texts))[0] is None and texts and _plural(texts[-1]):
            texts[-1] = _plural(texts[-1])
        return texts

    def sized(window: list[_GTok], size_tok: _GTok) -> tuple[GPU | None, float, str, float]:
        stated = float(_MEM_RE.match(size_tok.text).group(1))
        g, score, alias = _match_key(idx, _key(names(window) + [size_tok.text]))
        if g is not None:
            return g, score, alias, stated
        g, score, alias = _match_key(idx, _key(names(window)))
        if g is not None and _near(g, stated):
            return g, min(score, 90.0), alias, stated
        return None, 0.0, "", stated

    while i < n:
        if toks[i].text in _NOISE or _MEM_RE.match(toks[i].text):
            i += 1
            continue
        found = None
        for width in range(min(max_window, n - i), 0, -1):
            window = toks[i:i + width]
            # a window may not jump over a line break or a long gap
            if any(not close(window[j], window[j + 1]) for j in range(width - 1)):
                continue
            g, score, alias = _match_key(idx, _key(names(window)))
            if g is not None:
                found = (width, g, score, alias)
                break
        if found is None:
            i += 1
            continue
        width, g, score, alias = found
        stated = None
        nxt = i + width
        if nxt < n and _MEM_RE.match(toks[nxt].text) and toks[nxt].start - toks[nxt - 1].end <= 3:
            # "4060 Ti 8GB", "A100s (40G)": a size right after the name must agree with the card
            g2, score2, alias2, stated = sized(toks[i:nxt], toks[nxt])
            if g2 is None:
                i = nxt + 1
                continue
            g, score, alias, width = g2, score2, alias2, width + 1
        elif i > 0 and _MEM_RE.match(toks[i - 1].text) and close(toks[i - 1], toks[i]):
            # "8 32GB v100 gpus", "2 x 40GB A100s": the size may come first
            g2, score2, alias2, stated = sized(toks[i:nxt], toks[i - 1])
            if g2 is not None:
                g, score, alias = g2, score2, alias2
        start, end = toks[i].start, toks[i + width - 1].end
        j = i - 1  # include leading vendor words ("NVIDIA GeForce RTX") in the reported text
        while j >= 0 and toks[j].text in _VENDOR_WORDS and toks[j + 1].start - toks[j].end <= 1:
            start = toks[j].start
            j -= 1
        prefix = text[max(0, start - 12):start]
        count = 1
        m = _COUNT_BEFORE_RE.search(prefix) or _COUNT_CARDS_RE.search(prefix)
        if m:
            c = m.group(1)
            count = int(c) if c.isdigit() else _CN_NUM.get(c, 1)
        out.append(GpuMention(g, text[start:end], start, end, alias, score, count, stated))
        i += width
    return out


# ---------------------------------------------------------------------- nvidia-smi
_SMI_TABLE_RE = re.compile(r"^\|?\s*(\d{1,2})\s{1,8}(\S.*?)\s{1,40}(?:On|Off|WDDM|TCC)\s{0,8}\|")
_SMI_LIST_RE = re.compile(r"^GPU\s(\d{1,2}):\s(.+?)(?:\s\(UUID:.*)?$")
_SMI_MEM_RE = re.compile(r"(\d+)MiB\s{0,4}/\s{0,4}(\d+)MiB")


def parse_nvidia_smi_name(line: str) -> str | None:
    """The GPU name column of one ``nvidia-smi`` table line or ``nvidia-smi -L`` line."""
    if not isinstance(line, str):
        return None
    s = line.strip()
    m = _SMI_TABLE_RE.match(s) or _SMI_LIST_RE.match(s)
    if not m:
        return None
    name = m.group(2).strip()
    return name or None


@dataclass(frozen=True)
class SmiGpu:
    index: int
    name: str
    gpu: GPU | None
    used_mib: int | None
    total_mib: int | None


def parse_nvidia_smi(text: str, gpus: dict[str, GPU] | None = None) -> list[SmiGpu]:
    """GPUs listed in an ``nvidia-smi`` table (name line plus the memory line under it)."""
    out: list[SmiGpu] = []
    lines = text.splitlines() if isinstance(text, str) else []
    for i, line in enumerate(lines):
        s = line.strip()
        m = _SMI_TABLE_RE.match(s) or _SMI_LIST_RE.match(s)
        if not m:
            continue
        name = m.group(2).strip()
        used = total = None
        for follow in lines[i:i + 2]:
            mm = _SMI_MEM_RE.search(follow)
            if mm:
                used, total = int(mm.group(1)), int(mm.group(2))
                break
        g = resolve_gpu(name, gpus) if not name.endswith("...") else None
        if g is None and total:
            # truncated names ("NVIDIA GeForce ...") : fall back to a unique card with this nvidia-smi total
            same = [x for x in (gpus or load_gpus()).values()
                    if x.memory_source == "nvidia-smi" and x.memory_mib == total]
            if len({x.memory_mib for x in same}) == 1 and len(same) == 1:
                g = same[0]
        out.append(SmiGpu(int(m.group(1)), name, g, used, total))
    return out
