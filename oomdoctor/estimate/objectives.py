"""What a training objective adds: paired rows and extra models.

* DPO, ORPO, KTO, reward modelling: TRL concatenates chosen and rejected (KTO:
  the batch and its mismatched KL batch) into one forward, so each micro-batch
  carries twice the rows.
* DPO and KTO need a reference model: a frozen copy of the policy, except with
  LoRA, where TRL uses the base with the adapter disabled
  (``DPOTrainer``: ``ref_model=None`` and a peft model → ``null_ref_context``).
  ``precompute_ref_log_probs`` avoids the copy; not assumed.
* PPO (TRL's ``PPOTrainer``): policy, reference, reward model and value model;
  the value model trains alongside the policy (``PolicyAndValueWrapper``), so
  its activations and model states add to the policy's; the reward model is a
  frozen copy.  Assumed the same size as the policy.
* GRPO: policy and reference (only with ``beta > 0``); rows are the sampled
  completions in the per-device batch.
"""
from __future__ import annotations

from dataclasses import dataclass

from .derivation import Line, line
from .setup import Setup

PAIRED = {"dpo": 2, "orpo": 2, "kto": 2, "reward": 2}


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
    if o in ("dpo", "kto", "grpo", "ppo"):
        if setup.adapters:
            lines.append(line("objective.adapter_reference", objective=o))
        else:
            frozen += 1
            lines.append(line("objective.reference_copy", objective=o))
    trained = 1
    if o == "ppo":
        frozen += 1
        trained = 2
        lines.append(line("objective.ppo_models"))
    return Objective(rows, frozen, trained, o != "reward", tuple(lines))
