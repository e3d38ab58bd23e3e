"""Plain text (Markdown-friendly) for the CLI, the chat API and fallbacks."""
from __future__ import annotations

import json
import re
import shlex
from typing import Any

from ..knowledge import KnowledgeBase
from ..templating import show
from . import bars

BAR_WIDTH = 30


# Each kind of change is pasted somewhere different, so each renders as one block in one
# language: Python for argument mappings and code, JSON for a DeepSpeed config file,
# POSIX shell for commands and environment variables, and "# " lines for a note.
LANGUAGE = {"code": "python", "training_args": "python", "trainer_args": "python", "peft": "python",
            "bitsandbytes": "python", "deepspeed": "json", "shell": "shell", "launch": "shell",
            "env": "shell", "note": "text"}
# A mapping of arguments is spelled as a call to its class. TrainingArguments' keys are added to
# the user's own call (`...` stands for theirs); peft's and bitsandbytes' make a whole config,
# bound to the name the remedies' code uses.
CONFIG_CALL = {"training_args": ("TrainingArguments", ""),
               "peft": ("LoraConfig", "from peft import LoraConfig\npeft_config = "),
               "bitsandbytes": ("BitsAndBytesConfig", "from transformers import BitsAndBytesConfig\nbnb_config = ")}
LINE_WIDTH = 100
_NUMBER = re.compile(r"-?\d{1,12}(\.\d{1,12})?")


def typed(value: Any) -> Any:
    """A placeholder's default comes back as text ("2048"); in an argument mapping such text means the number."""
    if isinstance(value, str) and _NUMBER.fullmatch(value):
        return float(value) if "." in value else int(value)
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typed(v) for v in value]
    return value


def py_literal(value: Any) -> str:
    """A YAML value as the Python literal that means the same (true -> True, strings double-quoted)."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py_literal(k)}: {py_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(py_literal(v) for v in value) + "]"
    raise TypeError(f"no Python literal for {type(value).__name__}")


def py_call(name: str, args: dict[str, Any], placeholder: bool, column: int = 0) -> str:
    """`Name(..., key=value)`, wrapped inside the parentheses when it is long; `column` is where it starts."""
    items = (["..."] if placeholder else []) + [f"{k}={py_literal(v)}" for k, v in args.items()]
    one_line = f"{name}({', '.join(items)})"
    if column + len(one_line) <= LINE_WIDTH:
        return one_line
    indent = " " * (column + len(name) + 1)
    lines, current = [], ""
    for item in items:
        piece = item + ","
        if current and len(indent) + len(current) + 1 + len(piece) > LINE_WIDTH:
            lines.append(current)
            current = piece
        else:
            current = f"{current} {piece}" if current else piece
    lines.append(current.rstrip(","))
    return f"{name}(" + f"\n{indent}".join(lines) + ")"


def change_blocks(change: dict[str, Any]) -> list[tuple[str, str, str]]:
    """A remedy's change as (kind, language, text) blocks, in the order the remedy lists them."""
    blocks = []
    for key, body in change.items():
        if key not in ("code", "shell", "launch", "note", "env"):
            body = typed(body)
        if key in ("code", "shell", "launch"):
            text = body.rstrip()
        elif key == "note":
            text = "\n".join(f"# {line}" for line in str(body).splitlines())
        elif key == "env":
            text = "\n".join(f"export {k}={shlex.quote(str(v))}" for k, v in body.items())
        elif key == "deepspeed":
            text = json.dumps(body, indent=2, ensure_ascii=False)
        elif key == "trainer_args":  # {SFTConfig: {...}}: the class the keys belong to is named
            text = "\n".join(py_call(cls, args, placeholder=True) for cls, args in body.items())
        else:
            cls, prefix = CONFIG_CALL[key]
            text = prefix + py_call(cls, body, placeholder=not prefix, column=len(prefix.rsplit("\n", 1)[-1]))
        blocks.append((key, LANGUAGE[key], text))
    return blocks


def change_text(change: dict[str, Any]) -> str:
    """A remedy's change as the snippets a user pastes: one block per kind, a blank line between."""
    return "\n\n".join(text for _, _, text in change_blocks(change))


def render(reply: dict[str, Any], kb: KnowledgeBase) -> str:
    lang = reply["lang"]
    t = lambda key, **kw: kb.text(key, lang, **kw)  # noqa: E731
    lines: list[str] = [f"({notice})" for notice in reply.get("notices", [])]
    if reply["questions"]:
        q = reply["questions"][0]
        if reply["diagnoses"]:
            top = reply["diagnoses"][0]
            lines.append(f"{t('report.kind')}: {t('kind.' + reply['oom_kind'])} — {top['title']}")
        lines.append(f"{t('report.question')}: {q['text']}")
        lines.append(f"({t('report.why')}: {q['why']})")
        if q["options"]:
            lines.append(f"{t('report.options')}: " + " / ".join(o["label"] for o in q["options"]))
        lines.append(t("report.answer_hint"))
        return "\n".join(lines)
    lines.append(f"# {t('report.title')}")
    lines.append(f"{t('report.kind')}: {t('kind.' + reply['oom_kind'])}")
    lines.append("")
    lines.append(f"## {t('report.diagnoses')}")
    if not reply["diagnoses"]:
        lines.append(t("report.no_diagnosis"))
    for d in reply["diagnoses"][:3]:
        lines.append(f"- {d['title']} ({t('report.confidence')} {d['confidence']:.0%})")
        for why in d["why"]:
            lines.append(f"  - {why}")
    est = reply["estimate"]
    lines.append("")
    lines.append(f"## {t('report.estimate')}")
    if est is None:
        lines.append(t("report.no_estimate"))
    else:
        lines.extend("  " + line for line in bars.table(est, kb, lang, BAR_WIDTH, verdict=False))
        verdict = ""
        if est["fits"] is not None:
            verdict = " — " + (t("report.fits") if est["fits"] else t("report.does_not_fit"))
        lines.append(f"  {t('report.per_gpu', value=show(est['per_gpu_gib']))}"
                     + (f" / {t('report.capacity', value=show(est['gpu_capacity_gib']))}" if est["gpu_capacity_gib"] else "")
                     + verdict)
        lines.extend(f"  {remark}" for remark in est.get("remarks", []))
        lines.append(f"  {t('report.host_ram', value=show(est['host_ram_gib']))}")
        if est.get("smallest_gpu"):
            gpu = est["smallest_gpu"]
            label = f"{gpu['id']} ({show(gpu['memory_gib'])} GiB)"
            lines.append("  " + t("report.smallest_gpu", value=label))
        if est.get("max_batch_size") and est["gpu_capacity_gib"]:
            lines.append(f"  {t('report.max_batch', value=est['max_batch_size'])}")
    if reply["remedies"]:
        lines.append("")
        lines.append(f"## {t('report.remedies')}")
        for i, r in enumerate(reply["remedies"], 1):
            after = f" — {t('report.after', value=show(r['estimate_after_gib']))}" if r["estimate_after_gib"] is not None else ""
            if r.get("failed_moment_after"):
                after += f"; {r['failed_moment_after']}"
            lines.append(f"{i}. {r['title']}{after}")
            lines.append(f"   {r['effect']}")
            lines.append(f"   {t('report.cost')}: {r['cost']['speed']}; {r['cost']['quality']}")
            snippet = change_text(r["change"])
            lines.extend("   | " + line for line in snippet.splitlines())
    for plan in reply.get("plans", []):
        detail = f" (per_device_train_batch_size={plan['batch_size']}, gradient_accumulation_steps={plan['grad_accum']})" \
            if plan.get("batch_size") else ""
        lines.append(f"+ {' + '.join(plan['titles'])}{detail} — {t('report.after', value=show(plan['estimate_after_gib']))}")
    if reply["diagnoses"]:
        lines.append("")
        lines.append(f"## {t('report.verify')}")
        for d in reply["diagnoses"][:2]:
            lines.append(f"- {d['verify']}")
    if reply.get("actions"):
        lines.append("")
        lines.append(f"## {t('report.actions')}")
        lines.extend(reply["actions"])
    if reply["claims"]:
        lines.append("")
        lines.append(f"## {t('report.claims')}")
        for c in reply["claims"]:
            lines.append(f"- “{c['claim']}” → {c['truth']}")
    if reply["assumptions"]:
        lines.append("")
        lines.append(f"## {t('report.assumptions')}")
        lines.extend(f"- {a['text']}" for a in reply["assumptions"])
        lines.append("")
        lines.append(t("report.offer"))
    return "\n".join(lines)
