"""What-if: remedies applied to a set-up, searches over remedies, sizes that fit."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from oomdoctor.estimate import Setup, apply, estimate, max_batch_size, max_seq_len, min_gpus, search, smallest_gpu
from oomdoctor.estimate.whatif import NotModelled
from test_estimate import LLAMA3_8B, LLAMA3_70B

REMEDIES = [
    {"id": "gradient_checkpointing", "whatif": {"set": {"train.grad_checkpointing": True}}},
    {"id": "reduce_batch_size", "whatif": {"multiply": {"train.batch_size": 0.5, "train.grad_accum": 2}}},
    {"id": "shorten_sequences", "whatif": {"cap": {"train.seq_len": 1024}}},
    {"id": "use_qlora", "whatif": {"set": {"train.method": "qlora", "model.load_dtype": "nf4"}}},
    {"id": "zero3", "whatif": {"set": {"dist.strategy": "deepspeed", "dist.zero_stage": 3}}},
    {"id": "zero2", "whatif": {"set": {"dist.strategy": "deepspeed", "dist.zero_stage": 2}}},
    {"id": "expandable_segments", "whatif": {}},
    {"id": "fewer_workers", "whatif": {"set": {"data.num_workers": 2}}},
    {"id": "eval_accumulation", "whatif": {"set": {"eval.accumulation_steps": 4}}},
]


def lora_setup(**kw) -> Setup:
    base = dict(model=LLAMA3_8B, method="lora", lora_rank=16, batch_size=4, seq_len=2048, gpu_memory_gib=40)
    base.update(kw)
    return Setup(**base)


def test_apply_set_multiply_cap():
    s = lora_setup(batch_size=3, grad_accum=1, seq_len=4096)
    new = apply(s, {"set": {"train.grad_checkpointing": True, "lora.targets": ["all-linear"]},
                    "multiply": {"train.batch_size": 0.5, "train.grad_accum": 2},
                    "cap": {"train.seq_len": 2048}})
    assert new.grad_checkpointing and new.lora_targets == ("all-linear",)
    assert new.batch_size == 2 and new.grad_accum == 2          # round(1.5) = 2
    assert apply(s.replace(batch_size=1), {"multiply": {"train.batch_size": 0.5}}).batch_size == 1
    assert new.seq_len == 2048 and apply(s, {"cap": {"train.seq_len": 8192}}).seq_len == 4096
    assert apply(s, {"set": {"train.method": "qlora"}}).load_dtype == "nf4"
    assert apply(s, {"multiply": {"gpu.memory_gib": 2}}).gpu_memory_gib == 80


def test_apply_refuses_facts_it_does_not_model():
    with pytest.raises(NotModelled):
        apply(lora_setup(), {"set": {"data.num_workers": 2}})
    with pytest.raises(ValueError):
        apply(lora_setup(), {"replace": {"train.seq_len": 4}})


def test_gradient_checkpointing_makes_an_activation_bound_setup_fit():
    s = lora_setup()
    before = estimate(s)
    assert before.fits is False and before.limiter == "activations"
    after = estimate(apply(s, {"set": {"train.grad_checkpointing": True}}))
    assert after.fits is True


def test_search_ranks_single_remedies_then_minimal_combinations():
    s = lora_setup(batch_size=8, gpu_memory_gib=24, seq_len=4096)
    result = search(s, REMEDIES)
    assert result.baseline.fits is False
    skipped = dict(result.skipped)
    assert "expandable_segments" in skipped and "fewer_workers" in skipped
    # modelled, but this set-up keeps no evaluation logits: nothing to lower
    assert skipped["eval_accumulation"] == "lowers nothing in this set-up"
    singles = [o for o in result.options if len(o.remedies) == 1]
    assert {o.remedies[0] for o in singles} == {r["id"] for r in REMEDIES[:4]}
    # ZeRO on one GPU has nothing to shard over
    assert skipped["zero2"] == skipped["zero3"] == "lowers nothing in this set-up"
    combos = [o for o in result.options if len(o.remedies) > 1]
    assert combos and all(o.fits for o in combos)
    assert [o.cost for o in combos] == sorted(o.cost for o in combos)
    fitting_singles = {o.remedies for o in singles if o.fits}
    for combo in combos:
        assert not any(set(f) <= set(combo.remedies) for f in fitting_singles)


def test_search_with_the_knowledge_base_remedies():
    path = Path(__file__).resolve().parent.parent / "knowledge" / "remedies.yaml"
    remedies = yaml.safe_load(path.read_text(encoding="utf-8"))["remedies"]
    result = search(lora_setup(), remedies)
    ids = {o.remedies for o in result.fitting}
    assert ("gradient_checkpointing",) in ids


def test_max_batch_size_is_monotonic_and_exact():
    sizes = [max_batch_size(lora_setup(grad_checkpointing=True, gpu_memory_gib=g)) for g in (24, 40, 48, 80, 141)]
    assert sizes == sorted(sizes) and sizes[-1] > sizes[0]
    s = lora_setup(grad_checkpointing=True, gpu_memory_gib=80)
    best = max_batch_size(s)
    assert estimate(s.replace(batch_size=best)).fits
    assert not estimate(s.replace(batch_size=best + 1)).fits


def test_max_batch_size_is_zero_when_nothing_fits():
    assert max_batch_size(Setup(model=LLAMA3_70B, method="lora", gpu_memory_gib=24)) == 0
    with pytest.raises(ValueError):
        max_batch_size(lora_setup(gpu_memory_gib=None))


def test_max_seq_len():
    s = lora_setup(grad_checkpointing=True, batch_size=1, gpu_memory_gib=24)
    n = max_seq_len(s)
    assert n > 2048
    assert estimate(s.replace(seq_len=n)).fits and not estimate(s.replace(seq_len=n + 1)).fits


def test_combinations_never_set_one_fact_two_ways():
    s = lora_setup(method="full", load_dtype="bf16", batch_size=8, gpu_memory_gib=80, seq_len=4096, num_gpus=4,
                   strategy="ddp")
    combos = [set(o.remedies) for o in search(s, REMEDIES).options if len(o.remedies) > 1]
    assert any("zero3" in c for c in combos) and any("zero2" in c for c in combos)
    assert not any({"zero2", "zero3"} <= c for c in combos)


def test_min_gpus_shards_with_zero3():
    s = Setup(model=LLAMA3_8B, method="full", load_dtype="bf16", gpu_memory_gib=40, grad_checkpointing=True)
    found = min_gpus(s)
    assert found is not None
    n, used = found
    assert used.strategy == "deepspeed" and used.zero_stage == 3
    assert estimate(used).fits and (n == 1 or not estimate(used.replace(num_gpus=n - 1)).fits)


def test_smallest_gpu():
    s = lora_setup(grad_checkpointing=True, gpu_memory_gib=None)
    gpus = [("h100-80g", 79.6), ("rtx-4090", 23.99), ("a100-40g", 40.0), ("l40s", 44.99)]
    gpu_id, memory, est = smallest_gpu(s, gpus)
    assert gpu_id == "a100-40g" and est.fits
    assert smallest_gpu(Setup(model=LLAMA3_70B, method="full"), gpus) is None
