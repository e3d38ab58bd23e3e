"""Configuration keys in any of the shapes people paste them.

One scanner reads `key=value`, `key: value`, `"key": value`, `--key value`, `--key=value`,
`--hyphen-ated-key value`, bare `--flag`, a launcher's argv list (`'--key', 'value'`), YAML
block lists and nested YAML keys (`lora_parameters:` / `  rank: 16`); knowledge/settings.yaml
says which keys matter and which fact each sets.

What a value means is honoured, not just that a key is there: `load_in_4bit: False`,
`'deepspeed': None`, `fsdp: []`, `fsdp_config: {}` and `"enabled": "auto"` set nothing, and
the false or empty ones rule their value out for the readers that run later (a sentence
reader must not find "deepspeed" in `deepspeed=None`). Commented-out lines are not settings.
A value given by name (`$BS`, `args.batch_size`, `BATCH // MICRO`) counts only when the same
paste defines every name in it. When the paste sets a fact twice with different values and
the formats do not say which wins, the fact stays unknown.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import Any, Iterator

from ..knowledge import MAX_MAGNITUDE
from . import Finding, Unknown, snippet, unknown
from . import variables

NAME = "config_keys"
PRODUCES: set[str] = set()  # from knowledge/settings.yaml, see produced_facts()

# An unquoted value ends at a blank, a comma, a bracket, `;`, or the full-width punctuation of Chinese text.
_UNQUOTED = r"""[^\s,;()}\]'"，。；、：）】」！？]{1,200}(?:,[A-Za-z_][\w.-]{0,60}(?![\w.-]|[=:])){0,32}"""
_VALUE = (r"""(\$\(\([^()\n]{1,200}\)\)|\$\([^()\n]{1,200}\)|<[^<>\n]{1,160}>|\[[^\]\n]{0,400}\]|\{[^{}\n]{0,400}\}|"[^"\n]{0,200}"|'[^'\n]{0,200}'|""" + _UNQUOTED + ")")
_KEY_START = r"(?<![A-Za-z0-9_.-])"
_ASSIGN = re.compile(_KEY_START + r"""["']?([A-Za-z_][A-Za-z0-9_]{0,60})["']?[ \t]{0,4}[:=：][ \t]{0,4}""" + _VALUE)
# A flag's value never starts with "--": that is the next flag, and `--bf16` alone means true.
# A shell line continuation ("--do_eval \") is not a value either.
_FLAG = re.compile(r"(?<![\w-])--([A-Za-z_][A-Za-z0-9_-]{0,60})(?:(?:[ \t]{1,4}|=)(?!--|\\)" + _VALUE + r")?")
# DeepSpeed's launcher and subprocess errors print argv as a Python list: ['--lora_r', '8', '--bf16', 'False'].
_ARGV = re.compile(r"""(?<![\w-])["']--([A-Za-z_][A-Za-z0-9_-]{0,60})["'],[ \t]{0,4}["'](?!--)([^'"\n]{1,200})["']""")
# A YAML key whose value is an indented list on the next lines.
_BLOCK = re.compile(r"^([ \t]{0,8})([A-Za-z_][A-Za-z0-9_]{0,60}):[ \t]*\n((?:\1[ \t]{0,4}-[ \t]{1,4}[^\n]{1,120}\n?){1,64})", re.MULTILINE)
_EXPRESSION_TAIL = re.compile(r"[ \t]{0,4}(?://|[-+*/%])[ \t]{0,4}[\w$({][^\n,#)]{0,160}")
_YAML_KEY = re.compile(r"^([ \t]{0,40})(?:-[ \t]{1,4})?([A-Za-z_][A-Za-z0-9_]{0,60}):[ \t]*(\S?)", re.MULTILINE)
# `<OptimizerNames.ADAMW_TORCH: 'adamw_torch'>` as a printed TrainingArguments shows an enum.
_ENUM_REPR = re.compile(r"^<[A-Za-z_][\w.]{0,80}:\s{0,2}['\"]?([^'\"<>]{0,80})['\"]?>$")
# `OptimizerNames.ADAMW_TORCH`, `IntervalStrategy.STEPS` in code: the member's name is its value.
_ENUM_MEMBER = re.compile(r"^[A-Z][A-Za-z0-9]{1,60}\.([A-Z][A-Z0-9_]{0,60})$")

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}
_EMPTY = {"", "none", "null", "~", "[]", "{}", "''", '""'}
# A model's name can hold its quantization; such a checkpoint is already 4-bit whatever the loader says.
_PREQUANTIZED = re.compile(r"(?<![a-z])(?:gptq|awq|exl2|int4)(?![a-z])", re.IGNORECASE)
_BNB_4BIT = re.compile(r"bnb[-_]?4bit", re.IGNORECASE)
# Names that look like a model but belong to another family than the text model of the same size.
_MULTIMODAL = re.compile(r"(?<![a-z])(?:vl|omni|audio|vision|llava|guard|xcomposer|intern-?vl)(?![a-z])", re.IGNORECASE)
# A vLLM engine's own command or constructor: its tensor_parallel_size splits the inference engine, not training
# (`trl vllm-serve --tensor-parallel-size 2` serves rollouts on other GPUs; `vllm serve`; `LLM(..., tensor_parallel_size=2)`).
_VLLM_ENGINE = re.compile(r"(?<![\w-])(?:trl[ \t]{1,4}vllm-serve|vllm[ \t]{1,4}serve|vllm\.entrypoints\.[\w.]{1,60})(?![\w-])|(?<![\w.])LLM\(")
_VLLM_ENGINE_KEYS = {"tensor_parallel_size"}


class _Empty:
    """The key is there with no value: None, null, '', [], {}, false."""


class _Auto:
    """The value is decided elsewhere at run time ("auto")."""


class _Uncatalogued:
    """The value names a model the catalog does not hold: the fact stays unknown, no other model stands in."""


class _Unresolved:
    """The value refers to names the paste does not define."""


EMPTY, AUTO, UNCATALOGUED, UNRESOLVED = _Empty(), _Auto(), _Uncatalogued(), _Unresolved()
_CODE_REFERENCE = re.compile(r"[A-Za-z_]\w{0,60}(?:\.\w{1,60}){1,6}(?:\(\))?")


def _interpret(spec: Any, raw: str, names: dict, minimum: int) -> Any:
    """`read`, after a value given by name has been looked up in what the paste defines."""
    text = _strip(raw)
    if "$" in text or names.get(text) is not None or variables.is_reference(text) and not _CODE_REFERENCE.fullmatch(text):
        resolved = variables.resolve(text, names)
        if resolved is None or "$" in resolved:
            return UNRESOLVED
        return read(spec, resolved, minimum)
    value = read(spec, text, minimum)
    if _CODE_REFERENCE.fullmatch(text) and variables.is_reference(text) and (value is None or spec in ("string", "list")):
        return UNRESOLVED  # args.batch_size, torch.cuda.is_available(): decided when the code runs
    return value


def produced_facts(kb) -> set[str]:
    return {s["fact"] for s in kb.settings}


def _strip(raw: str) -> str:
    text = raw.strip().rstrip("\\").strip().rstrip(",").strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"`":
        text = text[1:-1].strip()
    enum = _ENUM_REPR.match(text)
    if enum:
        return enum.group(1).strip()
    member = _ENUM_MEMBER.match(text)
    if member:
        return member.group(1).lower()
    return text


def _as_list(text: str) -> list[str]:
    # a list, a tuple or a set as Python prints it: ['q_proj'], ('q_proj',), {'q_proj', 'v_proj'} (peft's LoraConfig repr)
    if len(text) >= 2 and (text[0], text[-1]) in (("[", "]"), ("(", ")"), ("{", "}")):
        text = text[1:-1]
    items = [part.strip().strip("'\"").strip() for part in re.split(r"[,\s]+", text)]
    items = [item for item in items if item and item.lower() not in _EMPTY]
    # "all" is LLaMA-Factory's and ms-swift's word for every linear layer, which peft calls all-linear.
    return ["all-linear" if item.lower() in ("all", "all-linear", "all_linear") else item for item in items]


def _integer(text: str, minimum: int) -> int | None:
    from .context_length import thousands

    m = re.fullmatch(r"(\d{1,12}(?:\.\d{1,12})?(?:[eE][+-]?\d{1,3})?)\s?([kK])?", text)
    if not m:
        return None
    number = thousands(float(m.group(1)), bool(m.group(2)))
    if not math.isfinite(number) or abs(number) > MAX_MAGNITUDE or number != int(number) or number < minimum:
        return None  # 0.1 of a dataset is a share, not a count; -1 means "use the default"
    return int(number)


def read(spec: Any, raw: str, minimum: int = 0) -> Any:
    """What a raw setting means: a fact value, EMPTY, AUTO, UNCATALOGUED, or None when it means nothing we track."""
    text = _strip(raw)
    low = text.lower()
    if isinstance(spec, dict) and "map" in spec:
        for key, value in spec["map"].items():
            if str(key).lower() == low:
                return value  # a map may give "no" or "none" a meaning of its own
    if low in _EMPTY or text.startswith("<") and text.endswith(">") and "path" in low:
        return EMPTY  # <path-to-model> is a placeholder, as good as nothing
    if low == "auto":
        return AUTO
    if spec == "integer":
        value = _integer(text, minimum)
        if value is None and low in _FALSE and minimum == 0:
            return 0
        return value
    if spec == "number":
        try:
            number = float(text)
        except ValueError:
            return None
        return number if math.isfinite(number) and abs(number) <= MAX_MAGNITUDE else None
    if spec == "boolean":
        return True if low in _TRUE else False if low in _FALSE else None
    if spec == "string":
        return text
    if spec == "present":
        return low not in _FALSE
    if spec == "list":
        return _as_list(text) or EMPTY
    if spec == "model":
        return _model(text)
    if isinstance(spec, dict):
        if "if_true" in spec:
            return spec["if_true"] if low in _TRUE else EMPTY if low in _FALSE else None
        if "if_false" in spec:
            return spec["if_false"] if low in _FALSE else None
        if "if_present" in spec:
            return EMPTY if low in _FALSE else spec["if_present"]
        if "words" in spec:
            words = {w for w in re.split(r"[^a-z0-9_]+", low) if w}
            hits = {value for key, value in spec["words"].items() if str(key).lower() in words}
            return hits.pop() if len(hits) == 1 else None
        for key, value in spec["map"].items():
            if str(key).lower() == low:
                return value
    return None


def _model(text: str) -> Any:
    """The catalog id a model name or path names; None for what is not a name at all (`model=model`)."""
    from ..catalog import resolve_model_id

    name = text.rstrip("/")
    if not re.search(r"[/\d-]", name):
        return None  # `model=model` in code is a variable, not a name
    model_id = resolve_model_id(name) or resolve_model_id(name.rsplit("/", 1)[-1])
    if _MULTIMODAL.search(name) and not (model_id and _MULTIMODAL.search(model_id)):
        return UNCATALOGUED  # a vision/audio sibling of a text model: not the catalog's model
    if model_id:
        return model_id
    # A local folder whose words name no family and hold no number (`/model/actor_model`,
    # `./pretrain`) says nothing about which model it holds: a name stated in words stands.
    return None if _opaque_folder(name) else UNCATALOGUED


_SIZE_WORD = re.compile(r"^(?:\d{1,3}x)?\d{1,4}(?:\.\d{1,3})?[bm]$|^a\d{1,4}(?:\.\d{1,3})?b$")  # "7b", "8x7b", "a3b"


@functools.lru_cache(maxsize=1)
def _family_words() -> frozenset[str]:
    """The first word of every catalog model's names other than sizes ("llama", "qwen2.5", "mixtral")."""
    from ..catalog.models import all_models
    from ..catalog.names import normalize_tokens

    words = set()
    for shape in all_models():
        for alias in (shape.id, shape.hf_id, *shape.names):
            first = next((t for t in normalize_tokens(alias) if not _SIZE_WORD.match(t)), None)
            if first is not None:
                words.add(first)
    return frozenset(words)


def _opaque_folder(name: str) -> bool:
    """A local path (not a Hub id) with no catalog family word and no digit anywhere in it."""
    from ..catalog.names import normalize_tokens

    local = name.startswith(("/", "./", "../", "~")) or name.count("/") >= 2
    if not local or re.search(r"\d", name):
        return False
    return not any(t in _family_words() for t in normalize_tokens(name))


@dataclass(frozen=True)
class _Reading:
    start: int
    key: str
    raw: str
    end: int
    parent: str | None


@functools.lru_cache(maxsize=2)
def distinct(text: str) -> str:
    """sentence.prose, once per paste: a long log is mostly repeated lines, and what people paste of
    configs, launches and their own words is in its distinct lines (cached: every config reader asks)."""
    from .sentence import prose

    return prose(text)


def _uncomment(text: str) -> str:
    """Comments blanked, offsets kept (comments.uncommented; cached: every config reader asks)."""
    from .comments import uncommented

    return uncommented(text)


def _yaml_structure(text: str) -> tuple[dict[int, str], dict[int, str]]:
    """For each line start: the key of the YAML mapping the line sits in, and (for a `key:` line
    with nothing after the colon) a marker when indented lines follow, i.e. the value is a block."""
    parents: dict[int, str] = {}
    blocks: dict[int, str] = {}
    stack: list[tuple[int, str]] = []
    lines = text.split("\n")
    offsets, pos = [], 0
    for line in lines:
        offsets.append(pos)
        pos += len(line) + 1
    for i, line in enumerate(lines):
        m = _YAML_KEY.match(line)
        if not m:
            continue
        indent = len(m.group(1).expandtabs(2))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if stack:
            parents[offsets[i]] = stack[-1][1]
        if not m.group(3):
            follow = next((ln for ln in lines[i + 1: i + 40] if ln.strip()), "")
            if len(follow) - len(follow.lstrip()) > indent and not follow.lstrip().startswith("- "):
                blocks[offsets[i]] = "{block}"
            stack.append((indent, m.group(2).lower()))
    return parents, blocks


def scan(text: str) -> list[_Reading]:
    """Every `key -> raw value` the text holds, in order, comments left out."""
    text = _uncomment(text)
    parents, blocks = _yaml_structure(text)

    def parent_of(pos: int) -> str | None:
        return parents.get(text.rfind("\n", 0, pos) + 1)

    readings: list[_Reading] = []
    argv = set()
    for m in _ARGV.finditer(text):
        readings.append(_Reading(m.start(), m.group(1), m.group(2), m.end(), None))
        argv.add(m.start() + 1)
    for m in _ASSIGN.finditer(text):
        raw, end = m.group(2), m.end()
        more = _EXPRESSION_TAIL.match(text, end)
        if more:  # `GRADIENT_ACCUMULATION_STEPS = BATCH_SIZE // MICRO_BATCH_SIZE`: the value is the whole expression
            raw, end = raw + more.group(0).rstrip().rstrip(","), more.end()
        readings.append(_Reading(m.start(), m.group(1), raw, end, parent_of(m.start())))
        if m.group(2).startswith("{") and len(m.group(2)) > 2:
            # a flow mapping: fsdp_config: {'fsdp_offload_params': False, ...}; its keys sit inside it
            inner = m.start(2) + 1
            for sub in _ASSIGN.finditer(text, inner, m.end(2) - 1):
                readings.append(_Reading(sub.start(), sub.group(1), sub.group(2), sub.end(), m.group(1).lower()))
    for start, marker in blocks.items():
        m = _YAML_KEY.match(text, start)
        if m:
            readings.append(_Reading(start, m.group(2), marker, m.end(), parent_of(start)))
    for line_start in _empty_yaml_keys(text, blocks):
        m = _YAML_KEY.match(text, line_start)
        readings.append(_Reading(line_start, m.group(2), "", m.end(), parent_of(line_start)))
    for m in _FLAG.finditer(text):
        if m.start() in argv:
            continue  # the same flag, already read with its value from the argv list
        value = m.group(2) if m.group(2) is not None else "true"
        readings.append(_Reading(m.start(), m.group(1), value, m.end(), None))
    for m in _BLOCK.finditer(text):
        items = [line.strip()[1:].strip() for line in m.group(3).splitlines() if line.strip()]
        readings.append(_Reading(m.start(), m.group(2), "[" + ",".join(items) + "]", m.end(), parent_of(m.start())))
    readings.sort(key=lambda r: r.start)
    return readings


def _empty_yaml_keys(text: str, blocks: dict[int, str]) -> Iterator[int]:
    """`fsdp:` / `deepspeed:` with nothing after the colon and no indented block: an empty value."""
    for m in re.finditer(r"^[ \t]{0,40}[A-Za-z_][A-Za-z0-9_]{0,60}:[ \t]*$", text, re.MULTILINE):
        if m.start() in blocks:
            continue
        follow = text[m.end() + 1: m.end() + 200].lstrip(" \t")
        if follow.startswith("- "):
            continue  # a block list, read by _BLOCK
        yield m.start()


def _index(kb) -> dict[str, list[dict]]:
    cached = getattr(kb, "_settings_index", None)
    if cached is None:
        cached = {}
        for setting in kb.settings:
            for key in setting["keys"]:
                cached.setdefault(key.lower(), []).append(setting)
        kb._settings_index = cached
    return cached


@dataclass
class _Candidate:
    value: Any
    rank: int
    detail: str
    key: str
    start: int = 1 << 62


def _excluded_when_empty(setting: dict) -> set:
    spec = setting["read"]
    out = {_hashable(v) for v in setting.get("empty_excludes") or ()}
    if isinstance(spec, dict):
        for kind in ("if_true", "if_present"):
            if kind in spec:
                out.add(_hashable(spec[kind]))
    return out


def extract(text: str, kb=None) -> Iterator[Finding]:
    if kb is None:
        from .. import knowledge
        kb = knowledge.default()
    text = distinct(text)
    index = _index(kb)
    readings = scan(text)
    names = variables.assignments(_uncomment(text))
    present = {r.key.lower().replace("-", "_") for r in readings if _strip(r.raw).lower() not in _EMPTY}
    candidates: dict[str, list[_Candidate]] = {}
    excluded: dict[str, set] = {}
    unsure: set[str] = set()
    raw_of: dict[str, list[str]] = {}

    for r in readings:
        key = r.key.lower().replace("-", "_")
        raw_of.setdefault(key, []).append(r.raw)
        settings = list(index.get(key, ())) + (list(index.get(f"{r.parent}.{key}", ())) if r.parent else [])
        for setting in settings:
            if set(setting.get("unless") or ()) & present:
                continue
            fact, spec = setting["fact"], setting["read"]
            value = _interpret(spec, r.raw, names, setting.get("min", 0))
            if value is UNRESOLVED:
                if spec == "boolean":
                    unsure.add(fact)  # `--gradient_checkpointing $GC`: only the key's own name says it
                elif isinstance(spec, dict) and "if_present" in spec and "$" in r.raw:
                    detail = snippet(text, r.start, r.end)  # `--deepspeed $CONFIG`: some config is given
                    candidates.setdefault(fact, []).append(
                        _Candidate(spec["if_present"], setting.get("rank", 0), detail, key, r.start))
                elif isinstance(spec, dict) and "if_true" in spec:
                    excluded.setdefault(fact, set()).add(_hashable(spec["if_true"]))
            elif value is EMPTY:
                excluded.setdefault(fact, set()).update(_excluded_when_empty(setting))
            elif value is UNCATALOGUED:
                unsure.add(fact)
            elif value is not None and value is not AUTO:
                detail = snippet(text, r.start, r.end)
                candidates.setdefault(fact, []).append(_Candidate(value, setting.get("rank", 0), detail, key, r.start))

    _apply_format_meanings(candidates, excluded, unsure, raw_of, present, text)

    for fact in sorted(set(candidates) | set(excluded) | unsure, key=lambda f: (_first(candidates.get(f)), f)):
        found = candidates.get(fact) or []
        if found:
            top = max(c.rank for c in found)
            best = [c for c in found if c.rank == top]
            values = {_hashable(c.value) for c in best}
            if len(values) == 1 and _hashable(best[0].value) not in excluded.get(fact, set()) and fact not in unsure:
                yield Finding(fact, best[0].value, best[0].detail)
                continue
            yield Finding(fact, unknown(), "the paste sets it more than once, to different values")
        elif fact in unsure:
            yield Finding(fact, unknown(), "set from a value the paste does not show")
        elif excluded.get(fact):
            yield Finding(fact, unknown(*excluded[fact]), "the config leaves it off")


def _first(found: list[_Candidate] | None) -> int:
    """Where a fact is first set, so that findings come in the order of the text (and never of a set)."""
    return min((c.start for c in found), default=1 << 62) if found else 1 << 62


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _apply_format_meanings(candidates: dict, excluded: dict, unsure: set, raw_of: dict, present: set, text: str) -> None:
    """What a setting means in combination with others, as the formats define it."""
    def values(fact: str) -> set:
        return {_hashable(c.value) for c in candidates.get(fact, ())}

    def add(fact: str, value: Any, detail: str, rank: int = 5) -> None:
        candidates.setdefault(fact, []).append(_Candidate(value, rank, detail, ""))

    models = [r for key in ("model_name_or_path", "base_model", "model", "model_id_or_path", "pretrained_model_name_or_path",
                             "model_name", "load", "checkpoint_dir") for r in raw_of.get(key, ())]
    prequantized = next((m for m in models if _PREQUANTIZED.search(m)), None)
    bnb_checkpoint = next((m for m in models if _BNB_4BIT.search(m)), None)
    if prequantized:
        # GPTQ/AWQ weights are already 4-bit; quantization_bit does not make them NF4.
        candidates.pop("model.load_dtype", None)
        unsure.add("model.load_dtype")
    elif bnb_checkpoint and not values("model.load_dtype") - {"nf4"}:
        add("model.load_dtype", "nf4", _strip(bnb_checkpoint))
    # quantization_type / bnb_4bit_quant_type pick the 4-bit kind only when 4-bit loading is on.
    kinds = {_strip(v).lower() for key in ("bnb_4bit_quant_type", "quantization_type") for v in raw_of.get(key, ())}
    kinds &= {"nf4", "fp4"}
    four_bit = values("model.load_dtype") & {"nf4", "fp4"}
    if four_bit and len(kinds) == 1:
        for c in candidates["model.load_dtype"]:
            if c.value in ("nf4", "fp4"):
                c.value = next(iter(kinds))
    elif kinds and not four_bit:
        excluded.setdefault("model.load_dtype", set()).update({"nf4", "fp4"})
    method = values("train.method")
    lora_keys = {"lora_r", "lora_rank", "lora_alpha", "lora_dim", "lora_target", "lora_target_modules", "target_modules",
                 "lora_target_linear", "adapter", "lora_dropout"} & present
    # axolotl trains every weight unless `adapter:` names one.
    axolotl = "base_model" in raw_of and {"dataset_prepared_path", "sequence_len", "sample_packing"} & set(raw_of)
    if axolotl and not lora_keys and not method:
        add("train.method", "full", "axolotl config without adapter:", rank=0)
    elif lora_keys and not method:
        add("train.method", "lora", "LoRA settings (" + ", ".join(sorted(lora_keys)[:3]) + ")", rank=0)
    method = values("train.method")
    four_bit = values("model.load_dtype") & {"nf4", "fp4"}
    if method == {"lora"} and (four_bit or prequantized or bnb_checkpoint):
        for c in candidates["train.method"]:
            c.value = "qlora"  # LoRA over a 4-bit base is QLoRA
    _drop_vllm_engine_settings(candidates, text)
    # Strategy: a config that turns one off rules it out; a stage implies DeepSpeed.
    if values("dist.zero_stage") and not values("dist.strategy"):
        add("dist.strategy", "deepspeed", "zero_stage", rank=0)


def vllm_engine_spans(text: str) -> list[tuple[int, int]]:
    """Where a vLLM engine's command (continued over trailing backslashes) or constructor call runs."""
    spans = []
    for m in _VLLM_ENGINE.finditer(text):
        if m.group().endswith("("):
            spans.append((m.start(), _closing(text, m.end())))
            continue
        end = m.end()
        for _ in range(64):
            newline = text.find("\n", end)
            if newline < 0:
                end = len(text)
                break
            end = newline
            if not text[:newline].rstrip(" \t").endswith("\\"):
                break
            end = newline + 1
        spans.append((m.start(), end))
    return spans


def _closing(text: str, start: int, limit: int = 4000) -> int:
    """The end of a call whose arguments begin at `start` (its closing bracket, or `limit` characters on)."""
    depth = 1
    for i in range(start, min(len(text), start + limit)):
        if text[i] in "([{":
            depth += 1
        elif text[i] in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
    return min(len(text), start + limit)


def _drop_vllm_engine_settings(candidates: dict, text: str) -> None:
    """Settings written to a vLLM engine describe the rollout engine, not the training job."""
    spans = vllm_engine_spans(text)
    if not spans:
        return
    for fact, found in list(candidates.items()):
        kept = [c for c in found if c.key not in _VLLM_ENGINE_KEYS or not any(a <= c.start < b for a, b in spans)]
        if kept:
            candidates[fact] = kept
        else:
            del candidates[fact]
