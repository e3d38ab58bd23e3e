"""The reply as data: what every channel renders, in the user's language."""
from __future__ import annotations

from typing import Any, TYPE_CHECKING

from ..knowledge import KnowledgeBase, Question
from ..templating import fill, show
from . import diagnosis as diagnosis_mod
from .. import redaction
from . import prescription
from .sizing import estimate_from, limits, say_derivation

if TYPE_CHECKING:
    from .evaluation import Evaluation

PARTS = ("weights", "gradients", "optimizer", "activations", "logits", "rollouts", "overhead")


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 2)


def estimate_dict(estimation, capacity: float | None, failed: str | None = None) -> dict[str, Any] | None:
    if estimation is None:
        return None
    raw = estimation.result.as_dict()
    moment = _failed_moment(estimation, failed)
    out = {
        "per_gpu_gib": _round(raw["per_gpu_gib"]),
        "allocated_gib": _round(raw.get("allocated_gib")),
        "host_ram_gib": _round(raw["host_ram_gib"]),
        "breakdown": {part: _round(raw["breakdown"].get(part, 0.0)) for part in PARTS},
        "gpu_capacity_gib": _round(capacity),
        "fits": raw.get("fits"),
        "headroom_gib": _round(raw.get("headroom_gib")),
        "peak_moment": raw.get("peak_moment"),
        # The moment the failure happened in, when it is not the step's peak (evaluation after training ran).
        "failed_moment": {"name": moment, "gib": _round(estimation.result.at(moment))} if moment else None,
        "total_params": raw.get("total_params"),
        "trainable_params": raw.get("trainable_params"),
        "derivation": [],       # worded in the reader's language by say_estimate
    }
    out.update(limits(estimation))
    if moment in prescription.AFTER_BACKWARD and estimation.result.fits is False:
        # A failure after backward says the step's activation peak fitted: inverse figures searched against that
        # peak (the card it needs, the batch or length it allows) would repeat what the failure contradicts.
        out.update(smallest_gpu=None, max_batch_size=None, max_seq_len=None)
    return out


def estimate_assumptions(estimation, kb: KnowledgeBase, lang: str) -> list[dict[str, Any]]:
    """What the estimator itself took for granted (the allocator's reserve, padding, the loss, ...), worded."""
    return [{"fact": None, "value": None, "text": kb.text("assume." + a.key, lang, **a.params)}
            for a in estimation.result.assumptions]


def say_estimate(est: dict[str, Any], estimation, kb: KnowledgeBase, lang: str) -> list[str]:
    """The estimate's own words in the user's language, for every channel that shows an estimate: its peak's
    moment (set on ``est``), and the remarks on how RL rollouts were counted, or what it cannot bound (evaluation
    logits with no eval set size)."""
    if est.get("peak_moment"):
        est["peak_label"] = kb.text("moment." + est["peak_moment"].replace(" ", "_"), lang)
    est["derivation"] = say_derivation(estimation.result, kb, lang)
    out = []
    result = estimation.result
    setup = estimation.setup
    if getattr(setup, "vllm", "none") == "server" and result.at("rollouts") is None:
        out.append(kb.text("report.rollouts_elsewhere", lang))
    elif result.at("rollouts") is not None:
        engine = kb.facts["rl.vllm"].label(setup.vllm, lang) or setup.vllm
        out.append(kb.text("report.rollouts", lang, engine=engine, value=show(result.at("rollouts"))))
    if result.eval_step_gib and result.eval_steps_held is None:
        out.append(kb.text("report.eval_grows", lang, value=show(result.eval_step_gib)))
    return out


def _remarks(reply: dict[str, Any], evaluation, values: dict[str, Any], kb: KnowledgeBase, lang: str) -> None:
    """Words about the estimate that every renderer shows as they are: the peak's moment in the user's language,
    the moment that failed when it is not the peak, evaluation logits that grow without a bound we know, and a
    training estimate that the log contradicts."""
    est = reply.get("estimate")
    if not est:
        return
    remarks = est.setdefault("remarks", [])
    moment = est.get("failed_moment")
    if moment:
        phase = prescription.MOMENT_PHASE[moment["name"]]
        label = kb.facts["phase"].label(phase, lang) or phase
        moment["text"] = kb.text("report.failed_moment", lang, moment=label, value=show(moment["gib"]))
        remarks.append(moment["text"])
        for r in reply["remedies"]:
            if r.get("failed_moment_after_gib") is not None:
                r["failed_moment_after"] = kb.text("report.moment_after", lang, moment=label,
                                                   value=show(r["failed_moment_after_gib"]))
    result = evaluation.estimation.result
    remarks.extend(say_estimate(est, evaluation.estimation, kb, lang))
    if moment and moment["name"] in prescription.AFTER_BACKWARD and values.get("estimate.training_exceeds_gpu") is True:
        # It died after backward, so forward and backward fitted: the estimate's activations are heavier than what ran.
        remarks.append(kb.text("report.contradicted_backward", lang, value=show(result.training_gib),
                               capacity=show(result.gpu_memory_gib)))
    elif values.get("log.after_steps") is True and values.get("estimate.training_exceeds_gpu") is True:
        # Steps completed, so a training step fitted: whatever the estimate assumed is heavier than what ran.
        remarks.append(kb.text("report.contradicted", lang, value=show(result.training_gib),
                               capacity=show(result.gpu_memory_gib)))


def _failed_moment(estimation, failed: str | None) -> str | None:
    moment = prescription.failed_moment(failed, estimation.result if estimation is not None else None)
    if moment is None or estimation is None or estimation.result.at(moment) is None:
        return None
    return moment if moment != estimation.result.peak_moment else None


def _capacity(evaluation, values: dict[str, Any]) -> float | None:
    """The GPU memory the estimate was held against (a stated card, or what the OOM message reported)."""
    if evaluation.estimation is not None and getattr(evaluation.estimation.setup, "gpu_memory_gib", None):
        return evaluation.estimation.setup.gpu_memory_gib
    return values.get("gpu.memory_gib")


def _breakdown(estimation) -> dict[str, float] | None:
    if estimation is None:
        return None
    raw = estimation.result.as_dict()["breakdown"]
    return {part: _round(raw.get(part, 0.0)) for part in PARTS}


def question_dict(question: Question, lang: str) -> dict[str, Any]:
    return {
        "id": question.id,
        "fact": question.fact,
        "text": question.text[lang],
        "why": question.why[lang],
        "answer_type": question.answer,
        "asks_count": bool(question.or_count),
        "options": [{"value": o["value"], "label": o["label"][lang]} for o in question.options],
    }


def _assumptions(evaluation, unknown: list[str], kb: KnowledgeBase, lang: str) -> list[dict[str, Any]]:
    out = []
    if evaluation.estimation is not None:
        for a in evaluation.estimation.assumptions:
            out.append({"fact": a.fact, "value": a.value, "text": a.text[lang]})
        out.extend(estimate_assumptions(evaluation.estimation, kb, lang))
    for fact in unknown:
        label = kb.facts[fact].text[lang] if fact in kb.facts else fact
        out.append({"fact": fact, "value": None, "text": kb.text("assume.unknown", lang, fact=label)})
    return out


def _claims(kb: KnowledgeBase, values: dict[str, Any], lang: str) -> list[dict[str, Any]]:
    """Common figures that concern this set-up, each checked against a live estimate."""
    out = []
    for claim in kb.claims.values():
        if values.get("model.name") != claim.setup.get("model.name"):
            continue
        if values.get("train.method") not in (None, claim.setup.get("train.method")):
            continue
        checked = estimate_from(dict(claim.setup))
        figure = _round(checked.result.per_gpu_gib) if checked else None
        out.append({"id": claim.id, "claim": claim.claim[lang],
                    "truth": fill(claim.truth[lang], {"per_gpu_gib": figure}.get), "sources": list(claim.sources)})
    return out


def _notices(notes: list[str], kb: KnowledgeBase, lang: str) -> list[str]:
    """What the notes mean, in the user's words: redactions and answers that could not be read."""
    out = []
    for note in notes:
        key, _, payload = note.partition(":")
        if key == "redacted":
            out.extend(redaction.describe(payload, lang, kb.text))
        elif key == "offer":
            # Set-up questions left for later, because the answer did not depend on them.
            wanted = "、".join if lang == "zh" else ", ".join
            topics = [(q.topic or kb.facts[q.fact].text)[lang] for q in map(kb.questions.get, payload.split(",")) if q]
            out.append(kb.text("notice.offer", lang, facts=wanted(topics)))
        elif f"notice.{key}" in kb.texts:
            out.append(kb.text(f"notice.{key}", lang))
    return out


def build(kb: KnowledgeBase, evaluation: "Evaluation", unknown: list[str], question: Question | None, lang: str,
          notes: list[str]) -> dict[str, Any]:
    memory = evaluation.memory
    values = {f.name: f.value for f in memory}
    diagnoses = []
    for d in evaluation.diagnoses[:5]:
        scenario = kb.scenarios[d.scenario]
        diagnoses.append({
            "id": d.scenario,
            "title": scenario.title[lang],
            "summary": scenario.summary[lang],
            "confidence": d.confidence,
            "oom_kind": scenario.oom_kind,
            "why": diagnosis_mod.reasons(d, evaluation.result, lang, kb),
            "verify": scenario.verify[lang],
            "trace": diagnosis_mod.traces(d, evaluation.result),
        })
    remedies = []
    plans = []
    failed = _failed_moment(evaluation.estimation, values.get("phase"))
    if question is None:
        ranked = prescription.rank(evaluation.diagnoses, evaluation.result, kb, values, evaluation.estimation)
        for plan in prescription.combinations(ranked, kb, evaluation.estimation):
            plan["titles"] = [kb.remedies[r].title[lang] for r in plan["remedies"]]
            plans.append(plan)
        for p in ranked:
            remedy = kb.remedies[p.remedy]
            remedies.append({
                "id": p.remedy,
                "title": remedy.title[lang],
                "effect": remedy.effect[lang],
                "cost": {"speed": remedy.cost_speed[lang], "quality": remedy.cost_quality[lang]},
                "estimate_after_gib": _round(p.after.result.per_gpu_gib) if p.after else None,
                "fits_after": prescription.fits_at(p.after, failed) if p.after else None,
                "failed_moment_after_gib": _round(p.after.result.at(failed)) if p.after and failed else None,
                "breakdown_after": _breakdown(p.after),
                "change": prescription.change_for(p, kb, lang),
                "sources": list(remedy.sources),
            })
    kind = diagnosis_mod.oom_kind(evaluation.result)
    reply = {
        "status": "question" if question is not None else "report",
        "lang": lang,
        "oom_kind": diagnosis_mod.oom_kind(evaluation.result),
        "facts": [f.as_dict() for f in memory],
        "diagnoses": diagnoses,
        "questions": [question_dict(question, lang)] if question is not None else [],
        "estimate": estimate_dict(evaluation.estimation, _capacity(evaluation, values), values.get("phase")),
        "remedies": remedies,
        "plans": plans,
        "assumptions": _assumptions(evaluation, unknown, kb, lang),
        "claims": _claims(kb, values, lang) if question is None else [],
        "actions": kb.text(f"actions.{kind}", lang).split("\n") if question is None and f"actions.{kind}" in kb.texts else [],
        "notes": notes,
        "notices": _notices(notes, kb, lang),
    }
    if question is None and not diagnoses and kind != "not_memory":
        reply["notices"] += _unconcluded(memory, values, kind, kb, lang)
    if reply["estimate"] is not None and kind in NOT_GPU_MEMORY and not _setup_stated(memory):
        # What ran out is not GPU memory and the set-up is all assumption: a per-GPU figure built on guesses
        # would only mislead.
        reply["estimate"] = None
    _remarks(reply, evaluation, values, kb, lang)
    if reply["estimate"] is not None and kind in NOT_GPU_MEMORY:
        # The user's own set-up, sized for reference: first say it is not what failed.
        reply["estimate"]["remarks"].insert(0, kb.text(f"report.estimate_not_the_cause.{kind}", lang))
    return reply


# What ran out when it is not GPU memory: a GPU estimate then is not the cause.
NOT_GPU_MEMORY = ("host", "not_memory")
# Facts about the set-up whose statement makes a GPU estimate the user's own rather than a set of guesses.
SETUP_FACTS = frozenset({"gpu.name", "gpu.memory_gib", "dist.num_gpus", "dist.strategy", "dist.zero_stage",
                         "train.method", "train.batch_size", "train.seq_len", "train.precision", "model.load_dtype"})


def _setup_stated(memory) -> bool:
    """Whether the user stated (in the text or an answer) anything about the set-up beyond the model."""
    return any(f.name in SETUP_FACTS and f.source.kind in ("extractor", "answer") for f in memory)


# Read facts shown when no cause is concluded, at most this many: the user sees what was understood.
MAX_READ_SHOWN = 8
# What would let the rules name a cause, in the order a user is best asked for it: (fact(s) any of which settles it, text).
NEEDED = ((("error.kind", "host.oom_killed", "process.exit_code"), "need.error"), (("oom_kind",), "need.kind"),
          (("model.name", "model.params_b"), "need.model"), (("gpu.name", "gpu.memory_gib"), "need.gpu"),
          (("phase", "log.after_steps"), "need.phase"))


def _unconcluded(memory, values: dict[str, Any], kind: str, kb: KnowledgeBase, lang: str) -> list[str]:
    """With no cause concluded the report still says something useful: what it read, and what it needs."""
    sep = "；" if lang == "zh" else "; "
    read = []
    for fact in memory:
        spec = kb.facts.get(fact.name)
        if fact.source.kind not in ("extractor", "answer") or spec is None or fact.name.startswith("estimate."):
            continue
        value = spec.label(fact.value, lang) or (", ".join(map(str, fact.value)) if isinstance(fact.value, list) else fact.value)
        if isinstance(value, bool):
            value = kb.text("value.yes" if value else "value.no", lang)
        read.append(f"{spec.text[lang]}: {value}{(' ' + spec.unit) if spec.unit and not isinstance(value, str) else ''}")
    out = [kb.text("notice.read", lang, facts=sep.join(read[:MAX_READ_SHOWN])) if read else kb.text("notice.read_nothing", lang)]
    missing = [kb.text(key, lang) for names, key in NEEDED
               if not any(values.get(n) not in (None, "unknown") for n in names) and not (names == ("oom_kind",) and kind != "unknown")]
    if missing:
        out.append(kb.text("notice.needs", lang, facts=sep.join(missing)))
    return out
