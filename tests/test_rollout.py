"""RL rollouts as a moment of the step: the generation batch, the engine, the reference, on every channel."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from oomdoctor.consultation import default
from oomdoctor.estimate import Setup, estimate
from oomdoctor.estimate.dtypes import GIB
from oomdoctor.estimate.rollout import kv_cache_bytes, rollout, rows
from oomdoctor.named_inputs import EstimateInputError, estimate_reply
from test_estimate import LLAMA3_8B

CARD = 79.19
C = default()


def grpo(**kw) -> Setup:
    base = dict(model=LLAMA3_8B, method="lora", objective="grpo", batch_size=4, seq_len=1024, gen_new_tokens=512,
                grad_checkpointing=True, gpu_memory_gib=CARD)
    base.update(kw)
    return Setup(**base)


def test_one_gpu_generates_the_batch_of_every_step_per_generation_and_num_generations_only_regroups():
    assert rows(grpo(grad_accum=4)) == 16                               # steps_per_generation = grad_accum
    assert rows(grpo(grad_accum=4, rl_steps_per_generation=2)) == 8
    assert rows(grpo(rl_generation_batch=64, num_gpus=8, strategy="ddp")) == 8
    few, many = estimate(grpo(rl_generations=2)), estimate(grpo(rl_generations=16))
    assert few.moments == many.moments


def test_generate_holds_the_kv_cache_of_the_generation_batch_beside_the_resting_state():
    one, four = estimate(grpo()), estimate(grpo(grad_accum=4))
    cache = kv_cache_bytes(grpo(), 4, 1024 - 1)
    assert cache == 4 * 1023 * 32 * 1024 * 4          # rows × tokens × layers × kv_dim × (key + value bytes)
    grown = four.moments["rollouts"] - one.moments["rollouts"]
    assert grown == pytest.approx(3 * cache * (1 + 1 / 32) / GIB, rel=0.02)    # + one layer's torch.cat copy
    assert one.moments["rollouts"] < one.moments["end of forward"]


def test_zero3_gathers_the_whole_policy_for_generate():
    setup = grpo(method="full", strategy="deepspeed", zero_stage=3, num_gpus=4)
    assert rollout(setup, 1000.0).gathered == 750.0
    params = LLAMA3_8B.param_count()
    # the whole bf16 policy beside this GPU's quarter of the fp32 master weights and Adam states
    assert estimate(setup).moments["rollouts"] > (params * 2 + params * 12 / 4) / GIB


def test_a_colocated_vllm_holds_its_share_awake_and_only_while_generating_asleep():
    plain, awake = estimate(grpo(vllm="server")), estimate(grpo(vllm="colocate", vllm_memory_share=0.4))
    asleep = estimate(grpo(vllm="colocate", vllm_memory_share=0.4, vllm_sleep=True))
    share = 0.4 * CARD
    for moment in ("end of forward", "start of backward", "optimizer step"):
        assert awake.moments[moment] - plain.moments[moment] == pytest.approx(share)
        assert asleep.moments[moment] == pytest.approx(plain.moments[moment])
    assert asleep.moments["rollouts"] == pytest.approx(plain.moments["optimizer step"] + share, rel=0.01)
    assert "rollouts" not in plain.moments
    # vLLM's pool is sized by the share: no allocator reserve on top of it
    assert awake.per_gpu_gib - plain.per_gpu_gib == pytest.approx(share, rel=0.01)


def test_the_reference_follows_beta_lora_and_precomputed_log_probs():
    weights = estimate(grpo(method="full")).weights_gib
    assert estimate(grpo(method="full", rl_beta=0.04)).weights_gib == pytest.approx(2 * weights)
    assert estimate(grpo(method="full", objective="rloo")).weights_gib == pytest.approx(2 * weights)   # beta 0.05
    assert estimate(grpo(method="lora", rl_beta=0.04)).weights_gib == estimate(grpo(method="lora")).weights_gib
    dpo = dict(model=LLAMA3_8B, method="full", objective="dpo")
    assert estimate(Setup(**dpo, precompute_ref=True)).weights_gib == pytest.approx(
        estimate(Setup(**dpo)).weights_gib / 2)
    assert estimate(grpo(method="full", reward_model=True)).weights_gib == pytest.approx(2 * weights)


def test_rest_fields_reach_the_estimate_and_bad_values_are_refused():
    base = {"model": "llama-3-8b", "method": "lora", "objective": "grpo", "gpu": "a100-80gb", "batch_size": 4,
            "max_new_tokens": 512, "max_prompt_length": 512, "grad_checkpointing": True}
    awake = estimate_reply(dict(base, vllm="colocate", vllm_gpu_memory_utilization=0.5))
    asleep = estimate_reply(dict(base, vllm="colocate", vllm_gpu_memory_utilization=0.5, vllm_sleep=True))
    assert awake["estimate"]["breakdown"]["rollouts"] == pytest.approx(0.5 * 79.19, abs=1)
    assert asleep["estimate"]["peak_moment"] == "rollouts"
    assert awake["estimate"]["per_gpu_gib"] > asleep["estimate"]["per_gpu_gib"]
    steps = estimate_reply(dict(base, steps_per_generation=8, generation_batch_size=None))
    assert steps["estimate"]["per_gpu_gib"] >= estimate_reply(base)["estimate"]["per_gpu_gib"]
    full = dict(base, method="full")
    assert estimate_reply(dict(full, beta=0.04))["estimate"]["breakdown"]["weights"] > \
        estimate_reply(dict(full, beta=0.0))["estimate"]["breakdown"]["weights"]
    assert estimate_reply(dict(full, reward_model=True))["estimate"]["breakdown"]["weights"] > \
        estimate_reply(full)["estimate"]["breakdown"]["weights"]
    dpo = {"model": "llama-3-8b", "method": "full", "objective": "dpo", "gpu": "h100-80gb"}
    assert estimate_reply(dict(dpo, precompute_ref_log_probs=True))["estimate"]["per_gpu_gib"] < \
        estimate_reply(dpo)["estimate"]["per_gpu_gib"]
    assert any(w["remedy"] == "vllm_sleep_mode" for w in awake["whatif"])
    for bad in ({"vllm": "sideways"}, {"vllm_gpu_memory_utilization": "lots"}, {"vllm_sleep": "perhaps"},
                {"num_generations": 2.5}):
        with pytest.raises(EstimateInputError):
            estimate_reply(dict(base, **bad))


def test_rest_endpoint_takes_the_rollout_fields(client):
    r = client.post("/api/v1/estimate", json={"model": "qwen2.5-7b", "method": "lora", "objective": "grpo",
                                               "gpu": "a100-80gb", "vllm": "colocate",
                                               "vllm_gpu_memory_utilization": 0.9, "vllm_sleep": True,
                                               "grad_checkpointing": True, "lang": "zh"})
    assert r.status_code == 200, r.get_data(as_text=True)
    body = r.get_json()
    assert body["estimate"]["peak_moment"] == "rollouts" and body["estimate"]["fits"] is False
    assert client.post("/api/v1/estimate", json={"model": "qwen2.5-7b", "vllm": 3}).status_code == 400


def test_cli_flags_take_the_rollout_inputs():
    def run(*args):
        return subprocess.run([sys.executable, "-m", "oomdoctor", "estimate", "--json", *args], capture_output=True,
                              text=True, timeout=120, cwd=str(__import__("pathlib").Path(__file__).parents[1]))
    base = ["--model", "qwen2.5-7b", "--method", "lora", "--objective", "grpo", "--gpu", "a100-80gb",
            "--grad-checkpointing", "true", "--vllm", "colocate", "--vllm-gpu-memory-utilization", "0.9"]
    awake = json.loads(run(*base).stdout)
    asleep = json.loads(run(*base, "--vllm-sleep", "true", "--num-generations", "8", "--steps-per-generation", "2",
                            "--max-prompt-length", "256", "--beta", "0.0").stdout)
    assert awake["estimate"]["peak_moment"] != "rollouts" and awake["estimate"]["breakdown"]["rollouts"] > 60
    assert asleep["estimate"]["peak_moment"] == "rollouts"
    assert run(*base, "--vllm", "sideways").returncode == 2


@pytest.mark.parametrize("lang,words", [("en", "rollout generation"), ("zh", "采样生成")])
def test_a_grpo_oom_with_colocated_vllm_names_the_rollouts_and_lowers_the_share(lang, words):
    log = ("accelerate launch grpo.py --model_name_or_path Qwen/Qwen2.5-7B-Instruct --use_peft --lora_r 16 "
           "--per_device_train_batch_size 4 --gradient_checkpointing --max_completion_length 512 "
           "--max_prompt_length 512 --use_vllm --vllm_mode colocate --vllm_gpu_memory_utilization 0.9 "
           "--vllm_enable_sleep_mode --bf16\n"
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.02 GiB. GPU 0 has a total capacity of "
           "79.19 GiB of which 309.06 MiB is free.\n")
    reply = C.diagnose(log, lang=lang)
    est = reply["estimate"]
    assert est["peak_moment"] == "rollouts" and words in est["peak_label"]
    assert est["breakdown"]["rollouts"] == pytest.approx(0.9 * 79.19, abs=0.5)
    assert any("vllm_gpu_memory_utilization 0.9 ×" in line for line in est["derivation"])
    assert words in est["derivation"][[i for i, line in enumerate(est["derivation"]) if words in line][-1]]
    share = next(r for r in reply["remedies"] if r["id"] == "vllm_lower_share")
    assert share["estimate_after_gib"] < est["per_gpu_gib"] - 30
    assert "rl_rollout_memory" in [d["id"] for d in reply["diagnoses"]][:3]
