"""What a training objective adds: paired rows and extra models.

* DPO, ORPO, KTO, reward modelling: TRL concatenates chosen and rejected (KTO:
  the batch and its mismatched KL batch) into one forward, so each micro-batch
  carries twice the rows.
* DPO and KTO need a reference model: a frozen copy of the policy, except with
  LoRA, where TRL uses the base with the adapter disabled
  (``DPOTrainer``: ``ref_model=None`` and a peft model → ``null_ref_context``).
  ``precompute_ref_log_probs`` computes the reference's log-probs over the
  dataset before training and keeps no reference model (TRL 1.16
  ``DPOTrainer.__init__``: ``ref_model = None`` when precomputing; under FSDP
  one is loaded for the pass and freed before training).
* PPO (TRL's ``PPOTrainer``): policy, reference, reward model and value model;
  the value model trains alongside the policy (``PolicyAndValueWrapper``), so
  its activations and model states add to the policy's; the reward model is a
  frozen copy.  Assumed the same size as the policy.
* GRPO and RLOO: a reference only with ``beta > 0`` and without LoRA (TRL 1.16
  ``GRPOTrainer.__init__``: ``beta == 0.0`` → ``ref_model = None``; a peft
  model disables its adapter instead).  ``GRPOConfig.beta`` defaults to 0.0,
  ``RLOOConfig.beta`` to 0.05.  ``sync_ref_model`` mixes the policy into that
  same reference copy, so it changes no memory.  Reward functions that are
  models are loaded on every training GPU (``accelerator.prepare_model(...,
  evaluation_mode=True)``); counted, when stated, as frozen copies of the
  policy's size.  Rows are the sampled completions in the per-device batch;
  generating them is a moment of its own (``rollout``).
"""
from __future__ import annotations

from dataclasses import dataclass

from .derivation import Line, line
from .setup import Setup

PAIRED = {"dpo": 2, "orpo": 2, "kto": 2, "reward": 2}
DEFAULT_BETA = {"grpo": 0.0, "rloo": 0.05}     # GRPOConfig.beta, RLOOConfig.beta (TRL 1.16)


@dataclass(frozen=True)
class Objective:
    rows: int                # sequences in one micro-batch forward
    frozen_copies: int       # whole frozen model copies (reference, reward model)
    trained_models: int      # models trained together (policy, and PPO's value model)
    lm_head: bool            # whether the loss runs over the vocabulary
    lines: tuple[Line, ...]


def objective(setup: Setup) -> Objective:
    o, b = setup.objective, setup.batch_size
    rows = b * PAIRED.get(o, 1)
    lines = []
    if rows != b:
        lines.append(line("objective.paired", objective=o, batch=b, rows=rows))
    frozen = 0
    if o in ("dpo", "kto", "grpo", "rloo", "ppo"):
        if o in ("dpo", "kto") and setup.precompute_ref:
            lines.append(line("objective.precomputed_reference", objective=o))
        elif o in DEFAULT_BETA and not beta(setup):
            lines.append(line("objective.no_reference", objective=o))
        elif setup.adapters:
            lines.append(line("objective.adapter_reference", objective=o))
        else:
            frozen += 1
            lines.append(line("objective.reference_copy", objective=o))
    if setup.reward_model and o != "ppo":
        frozen += 1
        lines.append(line("objective.reward_model"))
    trained = 1
    if o == "ppo":
        frozen += 1
        trained = 2
        lines.append(line("objective.ppo_models"))
    return Objective(rows, frozen, trained, o != "reward", tuple(lines))


def beta(setup: Setup) -> float:
    """The KL coefficient GRPO/RLOO run with: the stated one, else the trainer's default."""
    return setup.rl_beta if setup.rl_beta is not None else DEFAULT_BETA.get(setup.objective, 0.0)
