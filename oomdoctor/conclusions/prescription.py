"""Remedies, ranked: the diagnoses' own remedies, scored and checked against the estimate."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..engine import Result
from ..knowledge import KnowledgeBase
from ..templating import fill_value
from .diagnosis import Diagnosis
from .sizing import Estimation, after_remedy, apply_whatif, changes_anything

# Each later remedy in a scenario's list is worth a little less than the one before.
RANK_DECAY = 0.12
# A remedy is worth what it is worth to its likeliest cause, plus a little for every other cause it also treats:
# the most likely cause is fixed first, and a shared remedy does not outrank it by adding up weak causes.
SHARED_BONUS = 0.1
MIN_CONFIDENCE = 0.2
MIN_SAVING_GIB = 0.25
MIN_SAVING_SHARE = 0.02
# The phase a failure happened in, as the estimate's moment of the step.
FAILED_MOMENT = {"evaluation": "evaluation", "generate": "generation", "optimizer": "optimizer step"}
MOMENT_PHASE = {"evaluation": "evaluation", "generation": "generate", "rollouts": "generate", "optimizer step": "optimizer"}
# A rule that names a remedy with this priority or more names the fix for exactly the situation seen (TensorFlow's
# memory growth, the line that upcast the model): it comes first, whatever the estimate, which does not see that
# situation, says about what fits.
EXACT_FIX_PRIORITY = 80
# Objectives whose point is to train every weight (continued pre-training).
TRAINS_EVERY_WEIGHT = {"pretrain"}
# Moments that come after the step's forward and backward: a failure there shows those fitted, so whether the
# set-up fits is judged at the moment that failed, not at an activation peak the run already got past.
AFTER_BACKWARD = {"optimizer step"}


def failed_moment(phase: Any, result: Any) -> str | None:
    """The estimate's moment a failure in ``phase`` happened in: generate() in an RL step is its rollouts."""
    moment = FAILED_MOMENT.get(phase)
    moments = getattr(result, "moments", None) or {}
    if moment == "generation" and "generation" not in moments and "rollouts" in moments:
        return "rollouts"
    return moment


@dataclass
class Prescription:
    remedy: str
    score: float
    after: Estimation | None
    values_after: dict[str, Any]


def rank(diagnoses: list[Diagnosis], result: Result, kb: KnowledgeBase, values: dict[str, Any],
         current: Estimation | None, limit: int = 6) -> list[Prescription]:
    worth: dict[str, list[float]] = {}
    for diagnosis in diagnoses[:3]:
        if diagnosis.confidence < MIN_CONFIDENCE:
            continue
        for index, remedy in enumerate(kb.scenarios[diagnosis.scenario].remedies):
            worth.setdefault(remedy, []).append(diagnosis.confidence * (1 - RANK_DECAY * index))
    scores = {remedy: max(values) + SHARED_BONUS * (sum(values) - max(values)) for remedy, values in worth.items()}
    if not scores and current is not None:
        # No failure to explain, only a set-up: offer every remedy the estimator can try.
        for index, remedy in enumerate(kb.remedies.values()):
            if remedy.whatif:
                scores[remedy.id] = 0.1 - index * 1e-4
    # A rule that names the remedy for exactly this situation (TensorFlow's memory growth) outweighs a cause's list.
    # Short of an exact fix, a recommendation reorders the remedies of causes of about equal weight; it does not lift
    # the remedy of a clearly weaker cause over the likeliest cause's first remedy: the likeliest cause is fixed first.
    for conclusion in result.of_kind("recommend"):
        boosted = scores.get(conclusion.target, 0.0) + conclusion.weight / 100
        ceiling = _recommendation_ceiling(conclusion, diagnoses, kb)
        if ceiling is not None:
            boosted = min(boosted, max(scores.get(conclusion.target, 0.0), ceiling))
        scores[conclusion.target] = boosted
    stated = values
    if current is not None:
        # What the estimator assumed is what a remedy changes: halving an assumed batch of 1 is no change.
        values = {**{a.fact: a.value for a in current.assumptions}, **values}
    own = set(kb.scenarios[diagnoses[0].scenario].remedies) if diagnoses else set()
    failed = failed_moment(values.get("phase"), current.result) if current is not None else None
    # An estimate well below what the failing process held misses what filled the card: it is no judge of which
    # remedy saves memory (the diagnoses' own order is).
    judges_savings = current is not None and not _underestimates(current, stated) and not _misses_the_engine(current, stated)
    primary = {kb.scenarios[d.scenario].remedies[0] for d in diagnoses[:3]
               if d.confidence >= MIN_CONFIDENCE and kb.scenarios[d.scenario].remedies}
    out = []
    for remedy_id, score in scores.items():
        remedy = kb.remedies[remedy_id]
        # Setting what was only assumed is a change: the cause found may say the assumption is wrong
        # (bf16 assumed, fp32 diagnosed).
        # (What a set-up has where nothing is said, no offload, is not a guess a cause could overturn, unless a
        # cause found is that very thing: the remedy is its first.)
        absent = {} if remedy_id in primary else _absent_means(values)
        guessed = _sets_assumed(remedy, stated) and not _only_sets_held(remedy, absent)
        if not changes_anything({**absent, **values}, remedy) and not (guessed and remedy_id in own):
            continue
        after = after_remedy(values, remedy) if current is not None else None
        if judges_savings and after is not None and not _helps(after, current, values.get("oom_kind")) and not (
                guessed and remedy_id in own and after.result.per_gpu_gib <= current.result.per_gpu_gib):
            continue  # the estimate says it would not help this set-up (and it makes the peak worse)
        out.append(Prescription(remedy_id, round(score, 4), after, apply_whatif(values, remedy.whatif)))
    if not out and current is not None and diagnoses:
        # The estimate sees no saving anywhere: it does not model this failure (a generation it cannot size),
        # so it is no judge of the cause's own remedies.
        for remedy_id in kb.scenarios[diagnoses[0].scenario].remedies:
            remedy = kb.remedies[remedy_id]
            if remedy_id in scores and changes_anything(values, remedy):
                out.append(Prescription(remedy_id, round(scores[remedy_id], 4), after_remedy(values, remedy),
                                        apply_whatif(values, remedy.whatif)))
    # The GPU estimate judges remedies only for the memory that ran out, only where what was observed does
    # not contradict it, and only where it holds what failed (not a rollout engine it does not price).
    gpu_judges = (current is not None and values.get("oom_kind") != "host" and not _contradicted(current, stated)
                  and not _misses_the_engine(current, stated))
    if gpu_judges and not any(d.confidence >= MIN_CONFIDENCE for d in diagnoses[:3]):
        out.sort(key=lambda p: (not (p.after is not None and p.after.result.fits), p.after.result.per_gpu_gib if p.after else 1e9))
    elif gpu_judges and False in (current.result.fits, fits_at(current, failed)) and not _steps_fitted(stated, values):
        # (Steps that completed say the set-up fitted: a misfit then comes from the estimate's assumptions,
        # and the diagnosis's order below decides, not what would make the estimate fit.)
        # What makes it fit comes first, then what can make it fit with other changes (no activation setting
        # helps while the weights alone exceed the card); among what falls short, the diagnosis's order weighed
        # by how much each saves of the moment that failed (evaluation when that is where it died).
        moment = failed
        # The likeliest cause's own remedy that the estimator cannot price (a fused loss) is not known to fall
        # short: it competes with what fits. Other unpriced remedies rank with what does not fit.
        own = set(kb.scenarios[diagnoses[0].scenario].remedies) if diagnoses else set()
        # Among what fits, saving more than needed is worth nothing: the diagnosis's order decides.
        # Among what fits, sharding over the GPUs the job already has comes first: it keeps what is trained (LoRA
        # instead of full fine-tuning is a different result), the hardware and the speed (offload, more cards);
        # then, for a method the user stated, sharding with offload, which keeps what is trained and the cards.
        def key(p: Prescription):
            fits = fits_at(p.after, moment) if p.after is not None else p.remedy in own
            return (not fits, not _can_fit(p.after or current), _keeps(kb.remedies[p.remedy], values, stated) if fits else 2,
                    -(p.score if fits else _weighed(p, current, moment)), p.remedy)
        out.sort(key=key)
    else:
        out.sort(key=lambda p: (-p.score, p.remedy))
    exact = {c.target for c in result.of_kind("recommend") if c.weight >= EXACT_FIX_PRIORITY}
    out.sort(key=lambda p: p.remedy not in exact)
    # A remedy that trains something else than the objective is about (adapters for a run that pre-trains every
    # weight) is another run, not a fix: it comes after every remedy that keeps the run.
    if stated.get("train.objective") in TRAINS_EVERY_WEIGHT:
        out.sort(key=lambda p: _trains_adapters(kb.remedies[p.remedy]))
    # What the set-up has by its own rule (a toolkit that checkpoints unless told not to) is only worth checking
    # once everything else is tried: its config, unseen, might switch it off, but that is not the likely story.
    held = _held(stated)
    out.sort(key=lambda p: _only_sets_held(kb.remedies[p.remedy], held))
    return out[:limit]


# How much likelier the top cause must be than the cause a recommendation serves before it keeps its first place.
CLEARLY_LIKELIER = 0.15


def _recommendation_ceiling(conclusion, diagnoses: list[Diagnosis], kb: KnowledgeBase) -> float | None:
    """The score a recommended remedy may reach: just below the likeliest cause's first remedy when the cause it
    serves (what its rule concludes, else the likeliest cause that lists it) is clearly less likely; else no limit."""
    if conclusion.weight >= EXACT_FIX_PRIORITY or not diagnoses or diagnoses[0].confidence < MIN_CONFIDENCE:
        return None
    top = diagnoses[0]
    if conclusion.target in kb.scenarios[top.scenario].remedies:
        return None
    confidence = {d.scenario: d.confidence for d in diagnoses}
    served = [a.target for a in conclusion.firing.rule.then if a.kind == "conclude"]
    if not served:
        served = [d.scenario for d in diagnoses if conclusion.target in kb.scenarios[d.scenario].remedies]
    if not served:
        return None
    if top.confidence - max(confidence.get(s, 0.0) for s in served) < CLEARLY_LIKELIER:
        return None
    return top.confidence - 1e-3


def _trains_adapters(remedy) -> bool:
    """Whether a remedy switches the run to training adapters (LoRA, QLoRA) instead of the weights."""
    sets = remedy.whatif.get("set", {}) if remedy.whatif else {}
    return sets.get("train.method") in ("lora", "qlora")


def _steps_fitted(stated: dict[str, Any], values: dict[str, Any]) -> bool:
    """Whether training steps are known to have run before the failure: steps done, or a failure in (or right after)
    the evaluation that training runs between its steps, unless the text says no step completed."""
    if stated.get("log.after_steps") is not None:
        return stated["log.after_steps"] is True
    return values.get("phase") == "evaluation" or stated.get("log.after_eval") is True


def _absent_means(values: dict[str, Any]) -> dict[str, Any]:
    """What a set-up has where nothing is said (``silent`` defaults: no offload, no ZeRO): turning off what nobody
    turned on is no remedy."""
    from ..estimate.from_facts import load_defaults

    out: dict[str, Any] = {}
    for default in load_defaults():
        if default.silent and default.fact not in values and default.fact not in out and all(
                values.get(name) in allowed for name, allowed in default.when.items()):
            out[default.fact] = default.value
    return out


def _held(stated: dict[str, Any]) -> dict[str, Any]:
    """The values the stated set-up has by its own rule (``held`` defaults whose ``when`` the stated facts meet)."""
    from ..estimate.from_facts import load_defaults

    out: dict[str, Any] = {}
    for default in load_defaults():
        if default.held and default.fact not in stated and default.fact not in out and default.when and all(
                stated.get(name) in allowed for name, allowed in default.when.items()):
            out[default.fact] = default.value
    return out


def _only_sets_held(remedy, held: dict[str, Any]) -> bool:
    """Whether a remedy only sets facts to the values ``held`` gives them (by a toolkit's rule, or by absence)."""
    sets = remedy.whatif.get("set", {}) if remedy.whatif else {}
    return bool(sets) and not set(remedy.whatif) - {"set"} and all(
        name in held and held[name] == value for name, value in sets.items())


def _weighed(p: Prescription, current: Estimation, moment: str | None = None) -> float:
    """The diagnosis score, scaled by the share of memory the remedy saves (a half when unknown), at the
    failed moment of the step when the estimate has it, else at the peak."""
    if p.after is None:
        return p.score
    if moment and moment in (current.result.moments or {}) and moment in (p.after.result.moments or {}):
        before, now = current.result.moments[moment], p.after.result.moments[moment]
    else:
        before, now = current.result.per_gpu_gib, p.after.result.per_gpu_gib
    return p.score * (0.75 + max(0.0, before - now) / before / 2)


def fits_at(est: Estimation, moment: str | None) -> bool | None:
    """Whether an estimate fits the card, at the moment that failed when forward and backward evidently fitted."""
    if moment in AFTER_BACKWARD and est.result.gpu_memory_gib and est.result.at(moment) is not None:
        return est.result.at(moment) <= est.result.gpu_memory_gib
    return est.result.fits


# Facts that say only how the model states are spread over the GPUs.
SHARDING = {"dist.strategy", "dist.zero_stage"}
# Facts that say only which model states wait in host RAM.
OFFLOAD = {"dist.offload_optimizer", "dist.offload_param"}
# A model state the estimate holds at least this much above what the failing process held is not what ran.
CONTRADICTED = 1.25


def _shards_the_gpus_it_has(remedy, values: dict[str, Any]) -> bool:
    """Whether a remedy only changes how the model states are spread over the job's own GPUs (several)."""
    whatif = remedy.whatif or {}
    sets = whatif.get("set", {})
    return (bool(sets) and set(sets) <= SHARDING and set(whatif) == {"set"}
            and isinstance(values.get("dist.num_gpus"), (int, float)) and values["dist.num_gpus"] > 1)


def _keeps(remedy, values: dict[str, Any], stated: dict[str, Any]) -> int:
    """How much of the user's choices a remedy that fits keeps: 0 when it only shards the model states over the
    job's own GPUs; 1 when, for a method the user stated on several GPUs under a sharding framework they already
    run (DeepSpeed, FSDP), it only shards and offloads to host RAM: a switch in their own config that keeps what is
    trained and the cards (the step is slower); 2 otherwise (another method, more cards)."""
    if _shards_the_gpus_it_has(remedy, values):
        return 0
    whatif = remedy.whatif or {}
    sets = whatif.get("set", {})
    if ("train.method" in stated and stated.get("dist.strategy") in ("deepspeed", "fsdp") and bool(sets) and set(sets) <= SHARDING | OFFLOAD and set(whatif) == {"set"}
            and isinstance(values.get("dist.num_gpus"), (int, float)) and values["dist.num_gpus"] > 1):
        return 1
    return 2


def _contradicted(current: Estimation, stated: dict[str, Any]) -> bool:
    """Whether the OOM message contradicts the estimate: past loading the weights were resident, so weights
    estimated well above what the process held (a sharding or a count the text did not give) mean the estimate
    does not describe this run, and what would make it fit is no guide."""
    held = max((stated.get(name) or 0.0) for name in ("oom.process_in_use_gib", "oom.allocated_gib", "oom.reserved_gib"))
    if not held or stated.get("phase") == "loading":
        return False
    return current.result.breakdown.get("weights", 0.0) > CONTRADICTED * held


def _underestimates(current: Estimation, stated: dict[str, Any]) -> bool:
    """Whether the OOM message shows the process holding well above the whole estimate (image tokens, a cache, a
    length nobody stated): the estimate then does not see what ran out."""
    held = max((stated.get(name) or 0.0) for name in ("oom.allocated_gib", "oom.process_in_use_gib"))
    return bool(held) and held > CONTRADICTED * current.result.per_gpu_gib


def _misses_the_engine(current: Estimation, stated: dict[str, Any]) -> bool:
    """Whether a rollout engine holds part of the card (its own allocation failed, or it is colocated) while the
    estimate holds no rollouts: it cannot price the engine's share, so it is no judge of the remedies that change
    it, nor of what fits beside it."""
    engine = stated.get("oom.site") == "rollout_engine" or stated.get("rl.vllm") == "colocate"
    return engine and not current.result.breakdown.get("rollouts")


def _sets_assumed(remedy, stated: dict[str, Any]) -> bool:
    """Whether a remedy only sets facts nobody stated, so that the estimate, which assumed them, cannot judge it."""
    sets = remedy.whatif.get("set", {}) if remedy.whatif else {}
    return bool(sets) and not remedy.whatif.get("multiply") and all(name not in stated for name in sets)


def _can_fit(after: Estimation | None) -> bool:
    """Whether the model states alone (weights, gradients, optimizer) fit the card after a remedy, so that
    remedies for activations and logits could finish the job; unknown counts as possible."""
    if after is None or not after.result.gpu_memory_gib:
        return True
    parts = after.result.breakdown
    return parts.get("weights", 0.0) + parts.get("gradients", 0.0) + parts.get("optimizer", 0.0) < after.result.gpu_memory_gib


def _helps(after: Estimation, current: Estimation, kind: str | None) -> bool:
    """Whether a remedy lowers the memory that ran out (GPU unless the failure is in host RAM).

    Any moment of the step counts, not only the peak: a smaller evaluation batch
    does not lower a training peak, yet it is the fix when evaluation is what failed.
    """
    if kind == "host":
        return _saves(current.result.host_ram_gib, after.result.host_ram_gib)
    if (after.result.gpu_memory_gib or 0) > (current.result.gpu_memory_gib or 0):
        return True  # a larger card lowers nothing, yet leaves more room
    if _saves(current.result.per_gpu_gib, after.result.per_gpu_gib):
        return True
    before_moments, after_moments = current.result.moments or {}, after.result.moments or {}
    return any(_saves(before_moments[m], after_moments.get(m, before_moments[m])) for m in before_moments)


def _saves(before: float, now: float) -> bool:
    # A saving within the estimate's own rounding is no reason to pay a remedy's cost.
    return now < before - max(MIN_SAVING_GIB, MIN_SAVING_SHARE * before)


def change_for(prescription: Prescription, kb: KnowledgeBase, lang: str) -> dict[str, Any]:
    """The remedy's exact change, with placeholders filled from the set-up after it."""
    remedy = kb.remedies[prescription.remedy]
    lookup = prescription.values_after.get
    change = {}
    for key, body in remedy.change.items():
        change[key] = body[lang] if key == "note" else fill_value(body, lookup)
    return change


def combinations(prescriptions: list[Prescription], kb: KnowledgeBase, current: Estimation | None,
                 limit: int = 3) -> list[dict[str, Any]]:
    """When no remedy alone makes the set-up fit: the cheapest combinations that do.

    Cost is the position in the ranked list, so a combination of the top remedies
    beats one that needs a costly one.
    """
    if current is None or current.result.fits is not False:
        return []
    if any(p.after is not None and p.after.result.fits for p in prescriptions):
        return []
    from ..estimate import search

    ranked = [kb.remedies[p.remedy] for p in prescriptions if kb.remedies[p.remedy].whatif]
    found = search(current.setup, ranked, max_combination=3, limit=limit)
    plans = [{"remedies": list(o.remedies), "estimate_after_gib": round(o.per_gpu_gib, 2), "fits_after": o.fits}
             for o in found.fitting[:limit] if len(o.remedies) > 1]
    if plans:
        return plans
    # Halving once is rarely enough: find the micro-batch that fits after the best remedies.
    from dataclasses import replace

    from ..estimate import estimate, max_batch_size

    setup = current.setup
    effective = setup.batch_size * setup.grad_accum
    tried = [p for p in prescriptions if p.after is not None and p.remedy != "reduce_batch_size"][:2]
    for p in tried:
        batch = max_batch_size(p.after.setup)
        if 1 <= batch < p.after.setup.batch_size:
            fitted = replace(p.after.setup, batch_size=batch, grad_accum=-(-effective // batch))
            plans.append({"remedies": [p.remedy, "reduce_batch_size"], "batch_size": batch,
                          "grad_accum": fitted.grad_accum, "estimate_after_gib": round(estimate(fitted).per_gpu_gib, 2),
                          "fits_after": True})
    return plans[:limit]
