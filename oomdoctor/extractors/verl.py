"""verl's settings: Hydra overrides on its command line and its nested YAML config.

verl (volcengine/verl) is configured by dotted paths (``actor_rollout_ref.actor.fsdp_config.param_offload=True``
on the command line of ``python -m verl.trainer.main_ppo``, or the same path as nested YAML). The same leaf name
means different things under different parents (the critic and the reference model have their own
``fsdp_config.param_offload``; ``data.train_batch_size`` counts prompts per step, all GPUs together), so a
setting is read only at its full path. Paths and defaults: verl/trainer/config/_generated_ppo_trainer.yaml.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Iterator

from . import Finding, unknown

NAME = "verl"
PRODUCES = {"dist.offload_param", "dist.offload_optimizer", "train.grad_checkpointing", "train.activation_offload",
            "train.batch_size", "rl.vllm_memory_share", "rl.vllm_sleep", "rl.num_generations", "rl.prompt_len",
            "gen.max_new_tokens", "dist.num_gpus", "dist.context_parallel", "train.objective", "train.method",
            "lora.rank", "rl.beta", "dist.strategy"}

# A Hydra override (`a.b.c=value`, `+a.b=value`, `++a.b=value`) as a shell word.
_OVERRIDE = re.compile(r"(?<![\w.=/-])\+{0,2}((?:actor_rollout_ref|data|trainer|algorithm)(?:\.[A-Za-z_]\w{0,60}){1,6})"
                       r"=[\"']?([\w.+-]{1,40})")
# A YAML line: indentation, key, and the value after the colon (empty for a mapping that opens).
_YAML_LINE = re.compile(r"([ ]{0,40})([A-Za-z_]\w{0,60})[ \t]{0,3}:(?:[ \t]{1,8}([^#\n]{0,80}))?(?:[ \t]{0,8}#[^\n]{0,300})?")
_ROOTS = ("actor_rollout_ref", "data", "trainer", "algorithm")
_MAX_LINES = 20_000


def _bool(text: str) -> bool | None:
    return {"true": True, "false": False}.get(text.strip().strip("'\"").lower())


def _int(text: str) -> int | None:
    text = text.strip().strip("'\"")
    return int(text) if re.fullmatch(r"\d{1,9}", text) else None


def _number(text: str) -> float | None:
    text = text.strip().strip("'\"")
    return float(text) if re.fullmatch(r"\d{0,3}\.\d{1,6}|\d{1,3}", text) else None


# verl's fsdp_config.param_offload and optimizer_offload move the actor's shards to the host only between phases:
# update_actor loads both back before it trains (verl/workers/fsdp_workers.py, update_actor: load_fsdp_model_to_gpu,
# load_fsdp_optimizer), and FSDP's own CPU offload is switched off for the actor. So neither offloads anything
# during the training step; only FSDP2's offload_policy (CPUOffloadPolicy) does.
_BETWEEN_PHASES = {"actor_rollout_ref.actor.fsdp_config.param_offload": "dist.offload_param",
                   "actor_rollout_ref.actor.fsdp_config.optimizer_offload": "dist.offload_optimizer"}
# Path -> (fact, reader).
_PATHS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "actor_rollout_ref.model.enable_gradient_checkpointing": ("train.grad_checkpointing", _bool),
    "actor_rollout_ref.model.enable_activation_offload": ("train.activation_offload", _bool),
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": ("train.batch_size", _int),
    "actor_rollout_ref.rollout.gpu_memory_utilization": ("rl.vllm_memory_share", _number),
    "actor_rollout_ref.rollout.free_cache_engine": ("rl.vllm_sleep", _bool),
    "actor_rollout_ref.rollout.n": ("rl.num_generations", _int),
    "data.max_prompt_length": ("rl.prompt_len", _int),
    "data.max_response_length": ("gen.max_new_tokens", _int),
    "actor_rollout_ref.actor.ulysses_sequence_parallel_size": ("dist.context_parallel", _int),
}
# algorithm.adv_estimator: GAE is PPO with a critic; grpo and rloo are themselves. Others are left unknown.
_ESTIMATORS = {"gae": "ppo", "grpo": "grpo", "rloo": "rloo"}


def settings(text: str) -> dict[str, str]:
    """verl's settings in the text by full path, the first value of each (overrides, then YAML)."""
    found: dict[str, str] = {}
    for m in _OVERRIDE.finditer(text):
        found.setdefault(m.group(1), m.group(2))
    if re.search(r"(?:^|\n)(?:actor_rollout_ref|algorithm)[ \t]{0,3}:", text):
        found_yaml = _yaml_paths(text)
        for path, value in found_yaml.items():
            found.setdefault(path, value)
    return found


def _yaml_paths(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in text.split("\n", _MAX_LINES)[:_MAX_LINES]:
        m = _YAML_LINE.fullmatch(line.rstrip())
        if not m:
            continue
        indent, key, value = len(m.group(1)), m.group(2), (m.group(3) or "").strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if not stack and key not in _ROOTS:
            continue
        path = ".".join([k for _, k in stack] + [key])
        if value:
            out.setdefault(path, value)
        else:
            stack.append((indent, key))
    return out


# In words, beside verl's name: "actor param offload on", "optimizer offload 开了": as the settings, nothing is
# offloaded while the actor trains, so these only keep other readers from taking them for a training-time offload.
_VERL_NAMED = re.compile(r"(?<![\w/.-])(?:verl|veRL|VeRL|VERL)(?![\w/-])")
_SAID_OFFLOAD = re.compile(r"(?<![\w.])(?:actor[ \t]{1,3})?(param(?:eter)?s?|optimizer)[ _]offload(?:ing)?[ \t]{0,3}"
                           r"(?:is[ \t]{1,3}|=[ \t]{0,2})?(on|enabled|True|true|开了|开启|打开|off|disabled|False|false|关了|关闭)(?![\w])")
_SAID_FACT = {"param": "dist.offload_param", "optimizer": "dist.offload_optimizer"}


def said(text: str) -> Iterator[Finding]:
    """Offload said in words in a text that names verl."""
    if not _VERL_NAMED.search(text):
        return
    for m in _SAID_OFFLOAD.finditer(text):
        if m.group(2) in ("on", "enabled", "True", "true", "开了", "开启", "打开"):
            yield Finding(_SAID_FACT["optimizer" if m.group(1) == "optimizer" else "param"], unknown("cpu", "nvme"),
                          m.group(0))


def extract(text: str) -> Iterator[Finding]:
    found = settings(text)
    if not found:
        yield from said(text)
        return
    detail = lambda path: f"{path}={found[path]}"  # noqa: E731
    # With use_dynamic_bsz each micro-batch is packed up to ppo_max_token_len_per_gpu tokens (dp_actor's
    # rearrange_micro_batches): ppo_micro_batch_size_per_gpu then says nothing of the rows in a step.
    dynamic = _bool(found.get("actor_rollout_ref.actor.use_dynamic_bsz", "")) is True
    if dynamic:
        yield Finding("train.batch_size", unknown(), detail("actor_rollout_ref.actor.use_dynamic_bsz"))
    for path, (fact, read) in _PATHS.items():
        if dynamic and fact == "train.batch_size":
            continue
        if path in found and (value := read(found[path])) is not None:
            yield Finding(fact, value, f"{path}={found[path]}")
    strategy = found.get("actor_rollout_ref.actor.strategy", "").strip("'\"").lower()
    policy = "actor_rollout_ref.actor.fsdp_config.offload_policy"
    if strategy == "fsdp2" and _bool(found.get(policy, "")) is True:
        yield Finding("dist.offload_param", "cpu", detail(policy))
        yield Finding("dist.offload_optimizer", "cpu", detail(policy))
    for path, fact in _BETWEEN_PHASES.items():
        setting = _bool(found.get(path, ""))
        if setting is True:
            yield Finding(fact, unknown("cpu", "nvme"), detail(path))
        elif setting is False and not (strategy == "fsdp2" and _bool(found.get(policy, "")) is True):
            yield Finding(fact, "none", detail(path))
    if "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu" not in found and "data.train_batch_size" in found:
        # data.train_batch_size counts prompts for all GPUs, not a per-GPU batch of rows.
        yield Finding("train.batch_size", unknown(), detail("data.train_batch_size"))
    path = "algorithm.adv_estimator"
    if path in found:
        objective = _ESTIMATORS.get(found[path].strip("'\"").lower())
        yield Finding("train.objective", objective if objective else unknown(), detail(path))
    nodes, per_node = _int(found.get("trainer.nnodes", "1")), _int(found.get("trainer.n_gpus_per_node", ""))
    if nodes and per_node:
        yield Finding("dist.num_gpus", nodes * per_node, "trainer.nnodes × trainer.n_gpus_per_node")
    path = "actor_rollout_ref.model.lora_rank"
    if path in found and (rank := _int(found[path])) is not None and rank > 0:
        yield Finding("train.method", "lora", detail(path))
        yield Finding("lora.rank", rank, detail(path))
    path = "actor_rollout_ref.actor.strategy"
    if path in found:
        yield Finding("dist.strategy", "fsdp" if strategy in ("fsdp", "fsdp2") else unknown(), detail(path))
    # The reference model is loaded for the KL loss (use_kl_loss, kl_loss_coef, default 0.001) or the KL in the
    # reward (algorithm.use_kl_in_reward); with neither, none is.
    kl_loss, kl_reward = (_bool(found.get("actor_rollout_ref.actor.use_kl_loss", "")),
                          _bool(found.get("algorithm.use_kl_in_reward", "")))
    if kl_loss is True:
        coef = _number(found.get("actor_rollout_ref.actor.kl_loss_coef", "0.001"))
        if coef is not None:
            yield Finding("rl.beta", coef, "actor_rollout_ref.actor.use_kl_loss=True")
    elif kl_loss is False and kl_reward is not True:
        yield Finding("rl.beta", 0.0, "actor_rollout_ref.actor.use_kl_loss=False")
