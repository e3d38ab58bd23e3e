"""What generating an RL step's rollouts holds on a training GPU (TRL 1.16 ``GRPOTrainer``, ``RLOOTrainer``).

The generation batch (``trl/trainer/grpo_trainer.py``, ``_prepare_inputs`` and
``get_train_dataloader``; ``GRPOConfig.__post_init__``): completions for
``steps_per_generation`` micro-batches are generated at once and buffered, so one
GPU generates ``per_device_train_batch_size × steps_per_generation`` completions
(``steps_per_generation`` defaults to ``gradient_accumulation_steps``; a
``generation_batch_size`` given instead is split over the ranks).  The
per-device batch counts completions, not prompts: ``num_generations`` only says
how many of them share a prompt (the sampler repeats each prompt), so it does not
change what one GPU holds.

Where they are generated:

* the trainer's own ``model.generate`` (``use_vllm=False``, the default): a
  ``DynamicCache`` keeps keys and values for every layer, ``[rows, kv_heads,
  tokens, head_dim]`` whatever the attention implementation (``repeat_kv``
  expands them only inside the attention call), for the left-padded prompt and
  every generated token but the last; a layer grows by ``torch.cat``, its old
  and new tensors alive together, and each decoding step holds the last
  position's logits in fp32 and their softmax.  The cache's dtype is what the
  key and value projections return: the weights' dtype, or autocast's half
  precision (accelerate wraps the prepared model's forward in autocast, and
  ``unwrap_model_for_generation`` keeps that wrapper) for the values while the
  rotary embedding's fp32 ``cos``/``sin`` promote fp32-weight models' keys back
  to fp32.  Under ZeRO-3 ``ds3_gather_for_generation=True`` (the default)
  gathers the whole policy on every GPU for the call.
* vLLM colocated (``vllm_mode="colocate"``): ``LLM(gpu_memory_utilization=...)``
  in the training process; vLLM sizes its KV cache as the card's total memory
  × ``gpu_memory_utilization`` less its own peak (``vllm/v1/worker/
  gpu_worker.py``, ``Worker.determine_available_memory``), so it holds that
  share of the card, its own copy of the weights inside it, from start-up on.
  With ``vllm_enable_sleep_mode`` TRL puts it to sleep at level 2 after each
  generation (``trl/generation/vllm_generation.py``, ``VLLMGeneration.generate``:
  ``llm.sleep(level=2)``, weights and KV cache discarded, the weights pushed
  again from the trainer on waking), so the share is held only while it
  generates; vLLM's CUDA graphs and workspace stay and are not counted.
* a vLLM server (``vllm_mode="server"``) runs on other GPUs: the training GPUs
  hold nothing for generation.

Scoring the completions (the policy's old and the reference's log-probs) runs
under ``no_grad`` in chunks of the per-device batch, less than the training
forward over the same rows, so it is not a moment of its own.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import anatomy
from .derivation import Line, line
from .dtypes import GIB
from .setup import RL_OBJECTIVES, Setup

TRL_COMPLETION = 512        # GRPOConfig / RLOOConfig max_completion_length default (TRL 1.16)
VLLM_WEIGHT_BYTES = 2       # vLLM loads the checkpoint in bf16/fp16 (bitsandbytes: 4-bit codes)


@dataclass(frozen=True)
class Rollout:
    rows: int               # completions generated at once on one GPU
    prompt: int             # prompt tokens (left-padded to the longest)
    completion: int         # tokens generated per completion
    generation: float       # bytes generation adds on the GPU at its peak (cache and step tensors, or vLLM's share)
    gathered: float         # weights gathered beyond the GPU's shard for generation (ZeRO-3)
    resident: float         # bytes that stay beside the training step (vLLM's share when it never sleeps)
    lines: tuple[Line, ...] = field(default_factory=tuple)


def generates(setup: Setup) -> bool:
    """Whether the step generates rollouts (RL objectives)."""
    return setup.objective in RL_OBJECTIVES


def rows(setup: Setup) -> int:
    """Completions one GPU generates at once: per-device batch × steps per generation."""
    if setup.rl_generation_batch:
        return max(1, setup.rl_generation_batch // setup.num_gpus)
    return setup.batch_size * (setup.rl_steps_per_generation or setup.grad_accum)


def lengths(setup: Setup) -> tuple[int, int]:
    """(prompt, completion) tokens: the completion is max_completion_length, the prompt what the row leaves."""
    completion = setup.gen_new_tokens or TRL_COMPLETION
    prompt = setup.rl_prompt_len or max(setup.seq_len - completion, 1)
    return prompt, completion


def cache_dtypes(setup: Setup) -> tuple[int, int]:
    """Bytes of one cached key and one cached value element (see the module's note on autocast)."""
    if setup.load_dtype == "fp32":
        half = setup.precision != "fp32"
        return 4, (2 if half else 4)
    if setup.quantized:                      # bitsandbytes returns its compute dtype
        return (4, 4) if setup.precision == "fp32" else (2, 2)
    return 2, 2


def kv_cache_bytes(setup: Setup, rows_: int, tokens: int) -> float:
    """Bytes a DynamicCache holds for ``rows_`` rows of ``tokens`` cached positions."""
    d = anatomy.dims(setup.model)
    kb, vb = cache_dtypes(setup)
    return rows_ * tokens * d.layers * d.kv_dim * (kb + vb)


def rollout(setup: Setup, policy_weights: float) -> Rollout | None:
    """What generating the rollouts holds; ``policy_weights`` the whole policy's resident bytes (unsharded)."""
    if not generates(setup):
        return None
    d = anatomy.dims(setup.model)
    n = rows(setup)
    prompt, completion = lengths(setup)
    g, every = setup.rl_generations, n * setup.num_gpus       # TRL groups completions over all ranks
    if not g:
        prompts: Line | str = ""
    elif every % g:
        prompts = line("rollout.indivisible", total=every, generations=g)    # GRPOConfig refuses this batch
    else:
        prompts = line("rollout.prompts", generations=g, prompts=every // g, total=every)
    lines: list[Line] = [line("rollout.batch", rows=n, batch=setup.batch_size,
                              steps=setup.rl_steps_per_generation or setup.grad_accum, prompts=prompts)]
    if setup.vllm == "server":
        lines.append(line("rollout.vllm_server"))
        return Rollout(n, prompt, completion, 0.0, 0.0, 0.0, tuple(lines))
    if setup.vllm == "colocate":
        return _colocated(setup, d, n, prompt, completion, lines)
    # The last generated token is never fed back, so the cache ends one position short of the row.
    tokens = prompt + completion - 1
    kb, vb = cache_dtypes(setup)
    per_token_layer = d.kv_dim * (kb + vb)
    cache = n * tokens * per_token_layer * d.layers
    growth = n * tokens * per_token_layer                  # one layer's old and new tensors during torch.cat
    step_logits = n * d.vocab * 4 * 2                      # fp32 last-position logits and their softmax
    p = 4 if setup.precision == "fp32" else 2
    prefill = n * prompt * per_token_layer * d.layers + n * prompt * 3 * p * d.intermediate
    generation = max(cache + growth + step_logits, prefill)
    lines.append(line("rollout.kv_cache", rows=n, tokens=tokens, prompt=prompt, completion=completion,
                      layers=d.layers, bytes=per_token_layer, gib=cache / GIB, peak=generation / GIB))
    gathered = 0.0
    if setup.strategy == "deepspeed" and setup.zero_stage == 3 and setup.num_gpus > 1:
        gathered = policy_weights * (1 - 1 / setup.num_gpus)
        lines.append(line("rollout.zero3_gather", gib=gathered / GIB))
    return Rollout(n, prompt, completion, generation, gathered, 0.0, tuple(lines))


def _colocated(setup: Setup, d, n: int, prompt: int, completion: int, lines: list[Line]) -> Rollout:
    if not setup.gpu_memory_gib:
        lines.append(line("rollout.vllm_unknown_card", share=setup.vllm_memory_share))
        return Rollout(n, prompt, completion, 0.0, 0.0, 0.0, tuple(lines))
    share = setup.gpu_memory_gib * GIB * setup.vllm_memory_share
    params = anatomy.total_params(setup.model)
    if setup.quantized:
        linear = anatomy.linear_weights(setup.model)
        own = linear * 0.5 + (params - linear) * VLLM_WEIGHT_BYTES
    else:
        own = params * VLLM_WEIGHT_BYTES
    room = share - own
    per_token = d.layers * d.kv_dim * 2 * VLLM_WEIGHT_BYTES
    lines.append(line("rollout.vllm_share", share=setup.vllm_memory_share, card=setup.gpu_memory_gib,
                      gib=share / GIB, weights=own / GIB,
                      room=(line("rollout.vllm_room", gib=room / GIB, tokens=int(room // per_token),
                                 needed=n * (prompt + completion))
                            if room > 0 else line("rollout.vllm_no_room"))))
    resident = 0.0 if setup.vllm_sleep else share
    lines.append(line("rollout.vllm_sleep" if setup.vllm_sleep else "rollout.vllm_awake", gib=share / GIB))
    return Rollout(n, prompt, completion, share, 0.0, resident, tuple(lines))
