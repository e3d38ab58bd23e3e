"""Named inputs (REST fields, CLI flags) to facts to a stateless estimate reply.

Every input is checked where it enters: its fact's type, then its range (`RANGES`, which
the OpenAPI document publishes), then the estimator's own word on the value
(`observation.refusal`). A refused input is an EstimateInputError (a 400), never an
estimator's exception on the way out.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from . import knowledge
from .conclusions.report import estimate_assumptions, estimate_dict, say_estimate
from .conclusions.sizing import apply_whatif, estimate_from
from .estimate.setup import OPTIONAL_POSITIVE_INTS, POSITIVE_INTS
from .estimate.whatif import FIELDS
from .knowledge import MAX_MAGNITUDE
from .observation import refusal

log = logging.getLogger(__name__)


class EstimateInputError(ValueError):
    pass


# Input name -> fact name. The names follow what people type on a command line.
INPUTS = {
    "model": "model.name", "params_b": "model.params_b", "config": "model.config", "load_dtype": "model.load_dtype",
    "method": "train.method", "precision": "train.precision", "batch_size": "train.batch_size",
    "seq_len": "train.seq_len", "grad_accum": "train.grad_accum", "grad_checkpointing": "train.grad_checkpointing",
    "optimizer": "train.optimizer", "attention": "train.attention", "packing": "train.packing",
    "objective": "train.objective", "lora_rank": "lora.rank", "lora_targets": "lora.targets",
    "modules_to_save": "lora.modules_to_save", "gpu": "gpu.name", "gpu_memory_gib": "gpu.memory_gib",
    "num_gpus": "dist.num_gpus", "strategy": "dist.strategy", "zero_stage": "dist.zero_stage",
    "offload_optimizer": "dist.offload_optimizer", "offload_param": "dist.offload_param",
    "host_ram_gib": "host.ram_total_gib", "eval_batch_size": "train.eval_batch_size",
    "eval_samples": "eval.samples", "eval_accumulation_steps": "eval.accumulation_steps",
    "compute_metrics": "eval.compute_metrics", "prediction_loss_only": "eval.prediction_loss_only",
    "preprocess_logits": "eval.preprocess_logits", "predict_with_generate": "eval.predict_with_generate",
    "max_new_tokens": "gen.max_new_tokens", "num_beams": "eval.num_beams",
    "loss": "train.loss", "liger_kernels": "train.liger_kernels", "torch_compile": "train.torch_compile",
    "activation_offload": "train.activation_offload", "optimizer_in_backward": "train.optimizer_in_backward",
    "context_parallel": "dist.context_parallel", "tensor_parallel": "dist.tensor_parallel",
    "num_nodes": "dist.num_nodes", "gpus_per_node": "dist.gpus_per_node",
    "num_generations": "rl.num_generations", "steps_per_generation": "rl.steps_per_generation",
    "generation_batch_size": "rl.generation_batch_size", "max_prompt_length": "rl.prompt_len",
    "vllm": "rl.vllm", "vllm_gpu_memory_utilization": "rl.vllm_memory_share", "vllm_sleep": "rl.vllm_sleep",
    "beta": "rl.beta", "precompute_ref_log_probs": "rl.precompute_ref", "reward_model": "rl.reward_model",
    "fp8": "train.fp8", "kbit_upcast": "train.kbit_upcast", "fsdp_mixed_units": "dist.fsdp_mixed_units",
    "virtual_tokens": "prefix.virtual_tokens", "prefix_projection": "prefix.projection",
}


KINDS = {"integer": "an integer", "number": "a number", "boolean": "true or false", "list": "a list"}

# An input that only means something under a strategy implies it; naming another strategy beside it is
# a contradiction (ZeRO stages are DeepSpeed's: under DDP or FSDP a stage would be silently dropped).
# The prefix's size only means something in prefix tuning.
IMPLIES = {"zero_stage": ("strategy", "deepspeed"), "virtual_tokens": ("method", "prefix"),
           "prefix_projection": ("method", "prefix")}


@dataclass(frozen=True)
class InputSpec:
    """What one named input takes, for help texts and schemas: read from knowledge/facts.yaml and defaults.yaml."""

    name: str
    fact: str
    type: str
    text: str
    values: tuple[str, ...] = ()
    unit: str = ""
    # (value, condition) in the order knowledge/defaults.yaml tries them; condition {} is the fallback.
    defaults: tuple[tuple[Any, dict], ...] = ()


def describe(kb=None) -> list[InputSpec]:
    from .estimate.from_facts import load_defaults

    kb = kb or knowledge.default()
    facts_to_inputs = {fact: name for name, fact in INPUTS.items()}
    out = []
    for name, fact in INPUTS.items():
        spec = kb.facts[fact]
        defaults = []
        for d in load_defaults():
            # A toolkit's own default (its `when` names a fact no input sets) is never reached from named inputs.
            if d.fact == fact and all(k in facts_to_inputs for k in d.when):
                when = {facts_to_inputs[k]: v for k, v in d.when.items()}
                defaults.append((d.value, when))
                if not when:
                    break   # later entries are never reached
        out.append(InputSpec(name, fact, spec.type, spec.text["en"], tuple(spec.values), spec.unit, tuple(defaults)))
    return out


# DeepSpeed's ZeRO stages (the estimator's Setup holds the same bound; a test checks they agree).
ZERO_STAGES = (0, 3)
# Sizes that are more than nothing: a GPU's or the host's memory, a model's parameters.
_ABOVE_ZERO = ("gpu.memory_gib", "host.ram_total_gib", "model.params_b")


def ranges(key: str) -> dict[str, Any]:
    """The range an input's value must lie in, as JSON Schema keywords (OpenAPI 3.0 style)."""
    fact = INPUTS[key]
    if fact == "dist.zero_stage":
        return {"minimum": ZERO_STAGES[0], "maximum": ZERO_STAGES[1]}
    if FIELDS.get(fact) in POSITIVE_INTS + OPTIONAL_POSITIVE_INTS:
        return {"minimum": 1, "maximum": int(MAX_MAGNITUDE)}
    if fact in _ABOVE_ZERO:
        return {"minimum": 0, "exclusiveMinimum": True, "maximum": MAX_MAGNITUDE}
    return {}


def _in_range(value: Any, bounds: dict[str, Any]) -> bool:
    if "minimum" in bounds and (value < bounds["minimum"] or bounds.get("exclusiveMinimum") and value <= bounds["minimum"]):
        return False
    return "maximum" not in bounds or value <= bounds["maximum"]


def _say_range(kind: str, bounds: dict[str, Any]) -> str:
    low, high = bounds.get("minimum"), bounds.get("maximum")
    if bounds.get("exclusiveMinimum"):
        return f"{kind} above {low:g} and at most {high:.0e}"
    if high is not None and high < 1e6:
        return f"{kind} from {low} to {high}"
    return f"{kind} of at least {low} and at most {high:.0e}"


def _config_text(raw: Any) -> str:
    """A config.json given as text or as an object, checked to give a model shape."""
    from .catalog import from_hf_config

    try:
        config = json.loads(raw) if isinstance(raw, str) else raw
    except RecursionError:
        raise EstimateInputError("'config' nests too deeply to be a config.json") from None
    except ValueError as exc:
        raise EstimateInputError(f"'config' is not valid JSON ({str(exc)[:120]})") from None
    if not isinstance(config, dict):
        raise EstimateInputError("'config' must be a config.json object (as an object or as JSON text)")
    try:
        from_hf_config(config)
    except (ValueError, TypeError, KeyError, ArithmeticError, RecursionError) as exc:
        # ShapeError says what is wrong; a division by a zero dimension is the config's fault too.
        reason = str(exc) if isinstance(exc, ValueError) else "a dimension is zero or out of range"
        raise EstimateInputError(f"the config.json cannot be used: {reason[:300]}") from None
    return raw if isinstance(raw, str) else json.dumps(config)


def facts_from_inputs(inputs: dict[str, Any], kb) -> dict[str, Any]:
    from .catalog import resolve_gpu_id, resolve_model_id
    from .redaction import echo

    values: dict[str, Any] = {}
    for key, raw in inputs.items():
        if raw is None:
            continue
        if key not in INPUTS:
            from .schema import suggest
            raise EstimateInputError(f"unknown input {echo(key)}{suggest(key, INPUTS)}")
        fact = INPUTS[key]
        spec = kb.facts[fact]
        value = raw
        if key == "model":
            from .catalog.hub import enabled, repo_id_of
            # a Hub repo id goes to the Hub first when the lookup is on: its config.json is the model itself
            value = str(raw)[:512] if enabled() and repo_id_of(str(raw)) else resolve_model_id(str(raw))
            if value is None:
                # a Hub repo id (read through its config.json when the Hub lookup is on) or a name whose family
                # and size can be read; the estimate says which way the model was found
                from .catalog.hub import lookup
                value = str(raw)[:512] if lookup(str(raw)) is not None else None
            if value is None:
                raise EstimateInputError(f"unknown model {echo(raw)}: give a catalog name, a Hub repo id, params_b "
                                         "or a config.json")
        elif key == "gpu":
            value = resolve_gpu_id(str(raw))
            if value is None:
                raise EstimateInputError(f"unknown GPU {echo(raw)}: give a catalog name or gpu_memory_gib")
        elif key == "config":
            value = _config_text(raw)
        elif spec.type == "number" and spec.accepts(raw):
            value = float(raw)      # only once it is known to fit in one
        elif spec.type == "list" and isinstance(raw, str):
            value = [part.strip() for part in raw.split(",") if part.strip()]
        bounds = ranges(key)
        if not spec.accepts(value) or (bounds and not _in_range(value, bounds)):
            if spec.values:
                allowed = f"one of {list(spec.values)}"
            else:
                allowed = KINDS.get(spec.type, f"a {spec.type}")
                if bounds:
                    allowed = _say_range(allowed, bounds)
                elif spec.type in ("integer", "number"):
                    allowed += f" of at most {MAX_MAGNITUDE:.0e}"
            raise EstimateInputError(f"'{key}' = {repr(raw)[:60]} is not valid ({allowed})")
        reason = refusal(fact, value)
        if reason is not None:
            raise EstimateInputError(f"'{key}' = {repr(raw)[:60]} is not valid ({reason[:200]})")
        values[fact] = value
    return values


def implied_inputs(inputs: dict[str, Any], values: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """(fact, value, by which input) for each value an input implies; added to `values`.
    An input beside a contradicting one is refused rather than silently dropped."""
    added = []
    for key, (implied_key, implied) in IMPLIES.items():
        if inputs.get(key) is None:
            continue
        fact = INPUTS[implied_key]
        given = values.get(fact)
        if given is None:
            values[fact] = implied
            added.append((fact, implied, key))
        elif given != implied:
            raise EstimateInputError(f"'{key}' needs {implied_key} '{implied}', but {implied_key} is '{given}'")
    return added


def estimate_reply(inputs: dict[str, Any], lang: str = "en") -> dict[str, Any]:
    kb = knowledge.default()
    values = facts_from_inputs(inputs, kb)
    implied = implied_inputs(inputs, values)
    try:
        estimation = estimate_from(values)
    except ValueError as exc:  # the estimator refuses the inputs together (each passed alone)
        raise EstimateInputError(f"these inputs do not make a set-up the estimator can take: {str(exc)[:300]}") from None
    if estimation is None:
        raise EstimateInputError(_why_no_model(values))
    capacity = estimation.setup.gpu_memory_gib if hasattr(estimation.setup, "gpu_memory_gib") else values.get("gpu.memory_gib")
    whatif = []
    for remedy in kb.remedies.values():
        if not remedy.whatif:
            continue
        try:
            after = estimate_from(apply_whatif(values, remedy.whatif))
        except ValueError as exc:
            log.warning("what-if of %s not estimated: %s", remedy.id, exc)
            continue
        if after is None or after.result.per_gpu_gib >= estimation.result.per_gpu_gib - 0.01:
            continue
        whatif.append({"remedy": remedy.id, "title": remedy.title[lang],
                       "estimate_after_gib": round(after.result.per_gpu_gib, 2), "fits_after": after.result.fits,
                       "cost": {"speed": remedy.cost_speed[lang], "quality": remedy.cost_quality[lang]}})
    whatif.sort(key=lambda w: (not w["fits_after"], w["estimate_after_gib"]))
    est = estimate_dict(estimation, capacity)
    est.update(host_verdict(est["host_ram_gib"], values.get("host.ram_total_gib")))
    est["remarks"] = say_estimate(est, estimation, kb, lang)
    return {
        "lang": lang,
        "facts": [{"name": k, "value": v} for k, v in values.items()],
        "estimate": est,
        "assumptions": [{"fact": fact, "value": value,
                         "text": kb.text("assume.implied", lang, fact=kb.facts[fact].text[lang], value=value, by=by)}
                        for fact, value, by in implied]
        + [{"fact": a.fact, "value": a.value, "text": a.text[lang]} for a in estimation.assumptions]
        + estimate_assumptions(estimation, kb, lang),
        "whatif": whatif,
    }


def host_verdict(needed_gib: float | None, total_gib: float | None) -> dict[str, Any]:
    """The host RAM given (host_ram_gib) held against what the estimate needs, as the rules hold it."""
    fits = None if needed_gib is None or total_gib is None else needed_gib <= total_gib
    return {"host_capacity_gib": total_gib, "host_fits": fits}


def _why_no_model(values: dict[str, Any]) -> str:
    """What to say when no shape came out of the inputs (a config was checked where it entered)."""
    return "the model is unknown: give 'model', 'params_b' or 'config'"
