"""A direct estimate request (REST /estimate, CLI `estimate`): named inputs to facts to a reply."""
from __future__ import annotations

from typing import Any

from . import knowledge
from .estimation import apply_whatif, estimate_from
from .knowledge import MAX_MAGNITUDE
from .report import estimate_assumptions, estimate_dict, say_estimate


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
}


KINDS = {"integer": "an integer", "number": "a number", "boolean": "true or false", "list": "a list"}


def facts_from_inputs(inputs: dict[str, Any], kb) -> dict[str, Any]:
    from .catalog import resolve_gpu_id, resolve_model_id

    values: dict[str, Any] = {}
    for key, raw in inputs.items():
        if raw is None:
            continue
        if key not in INPUTS:
            from .schema import suggest
            raise EstimateInputError(f"unknown input '{key}'{suggest(key, INPUTS)}")
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
                raise EstimateInputError(f"unknown model '{raw}': give a catalog name, a Hub repo id, params_b "
                                         "or a config.json")
        elif key == "gpu":
            value = resolve_gpu_id(str(raw))
            if value is None:
                raise EstimateInputError(f"unknown GPU '{raw}': give a catalog name or gpu_memory_gib")
        elif spec.type == "number" and spec.accepts(raw):
            value = float(raw)      # only once it is known to fit in one
        elif spec.type == "list" and isinstance(raw, str):
            value = [part.strip() for part in raw.split(",") if part.strip()]
        if not spec.accepts(value):
            if spec.values:
                allowed = f"one of {list(spec.values)}"
            else:
                allowed = KINDS.get(spec.type, f"a {spec.type}")
                if spec.type in ("integer", "number"):
                    allowed += f" of at most {MAX_MAGNITUDE:.0e}"
            raise EstimateInputError(f"'{key}' = {repr(raw)[:60]} is not valid ({allowed})")
        values[fact] = value
    return values


def estimate_reply(inputs: dict[str, Any], lang: str = "en") -> dict[str, Any]:
    kb = knowledge.default()
    values = facts_from_inputs(inputs, kb)
    estimation = estimate_from(values)
    if estimation is None:
        raise EstimateInputError(_why_no_model(values))
    capacity = estimation.setup.gpu_memory_gib if hasattr(estimation.setup, "gpu_memory_gib") else values.get("gpu.memory_gib")
    whatif = []
    for remedy in kb.remedies.values():
        if not remedy.whatif:
            continue
        after = estimate_from(apply_whatif(values, remedy.whatif))
        if after is None or after.result.per_gpu_gib >= estimation.result.per_gpu_gib - 0.01:
            continue
        whatif.append({"remedy": remedy.id, "title": remedy.title[lang],
                       "estimate_after_gib": round(after.result.per_gpu_gib, 2), "fits_after": after.result.fits,
                       "cost": {"speed": remedy.cost_speed[lang], "quality": remedy.cost_quality[lang]}})
    whatif.sort(key=lambda w: (not w["fits_after"], w["estimate_after_gib"]))
    est = estimate_dict(estimation, capacity)
    est["remarks"] = say_estimate(est, estimation, kb, lang)
    return {
        "lang": lang,
        "facts": [{"name": k, "value": v} for k, v in values.items()],
        "estimate": est,
        "assumptions": [{"fact": a.fact, "value": a.value, "text": a.text[lang]} for a in estimation.assumptions]
        + estimate_assumptions(estimation, kb, lang),
        "whatif": whatif,
    }


def _why_no_model(values: dict[str, Any]) -> str:
    """What to say when no shape came out of the inputs: the config's own fault when one was given."""
    config = values.get("model.config")
    if config:
        import json

        from .catalog import ModelShape, ShapeError
        try:
            ModelShape.from_hf_config(json.loads(config))
        except ValueError as exc:       # ShapeError, or JSON that does not parse
            return f"the config.json cannot be used: {str(exc)[:300]}"
    return "the model is unknown: give 'model', 'params_b' or 'config'"
