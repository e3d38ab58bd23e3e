"""Plain text (Markdown-friendly) for the CLI, the chat API and fallbacks."""
from __future__ import annotations

from typing import Any

import yaml

from ..knowledge import KnowledgeBase
from ..templating import show
from . import bars

BAR_WIDTH = 30


def change_text(change: dict[str, Any]) -> str:
    """A remedy's change as the snippet a user pastes."""
    parts = []
    for key, body in change.items():
        if key == "code" or key == "shell" or key == "launch":
            parts.append(body.rstrip())
        elif key == "note":
            parts.append(f"# {body}")
        elif key == "env":
            parts.extend(f"export {k}={v}" for k, v in body.items())
        elif key == "training_args":
            args = ", ".join(f"{k}={v!r}" for k, v in body.items())
            parts.append(f"TrainingArguments(..., {args})")
        else:
            parts.append(f"# {key}\n" + yaml.safe_dump(body, sort_keys=False, allow_unicode=True).rstrip())
    return "\n".join(parts)


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
