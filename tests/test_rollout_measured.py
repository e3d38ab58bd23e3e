"""The rollout KV cache against what transformers' generate() really holds (runs where torch is installed).

A tiny LlamaForCausalLM (random weights, nothing downloaded) generates on CPU the way TRL's
GRPOTrainer does without vLLM: left-padded prompts, sampling, a fixed number of new tokens. The
DynamicCache it returns is summed storage by storage and compared with the estimator's figure to
the byte, for half-precision weights, fp32 weights, and fp32 weights under bf16 autocast (where
the keys come back fp32 from the rotary embedding and the values stay bf16).
"""
from __future__ import annotations

import pytest

from conftest import require

torch = require("torch")
transformers = require("transformers")

from oomdoctor.estimate import Setup  # noqa: E402
from oomdoctor.estimate.rollout import cache_dtypes, kv_cache_bytes, lengths, rows  # noqa: E402
from test_estimate import TINY  # noqa: E402

PROMPT, NEW, BATCH, STEPS = 11, 9, 3, 2


def _generated_cache(dtype, attention: str, autocast: bool) -> tuple[int, list]:
    cfg = transformers.LlamaConfig(hidden_size=TINY.hidden, intermediate_size=TINY.intermediate,
                                   num_attention_heads=TINY.heads, num_key_value_heads=TINY.kv_heads,
                                   num_hidden_layers=TINY.layers, vocab_size=TINY.vocab, pad_token_id=0,
                                   bos_token_id=2, eos_token_id=1, attn_implementation=attention)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).to(dtype).eval()
    n = BATCH * STEPS
    ids = torch.randint(3, TINY.vocab, (n, PROMPT))
    mask = torch.ones_like(ids)
    ids[: n // 2, :4], mask[: n // 2, :4] = 0, 0         # shorter prompts, left-padded to the longest
    context = torch.autocast("cpu", dtype=torch.bfloat16) if autocast else torch.no_grad()
    with context, torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=NEW, min_new_tokens=NEW,
                             do_sample=True, return_dict_in_generate=True)
    cache = getattr(out, "cache", None) or out.past_key_values
    tensors = [t for layer in cache.layers for t in (layer.keys, layer.values)]
    return sum(t.untyped_storage().nbytes() for t in tensors), tensors


@pytest.mark.parametrize("load_dtype,precision,attention,autocast", [
    ("bf16", "bf16", "sdpa", False),
    ("fp32", "fp32", "eager", False),
    ("fp32", "bf16", "sdpa", True),
])
def test_the_cache_generate_holds_equals_the_estimate(load_dtype, precision, attention, autocast):
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[load_dtype]
    measured, tensors = _generated_cache(dtype, attention, autocast)
    setup = Setup(model=TINY, method="full", load_dtype=load_dtype, precision=precision, attention=attention,
                  objective="grpo", batch_size=BATCH, grad_accum=STEPS, seq_len=PROMPT + NEW, gen_new_tokens=NEW)
    prompt, completion = lengths(setup)
    assert (prompt, completion) == (PROMPT, NEW)
    # every kv head, never the query heads, whatever the attention; the last sampled token is not cached
    assert all(t.shape == (rows(setup), TINY.kv_heads, PROMPT + NEW - 1, TINY.head_dim) for t in tensors)
    key_bytes, value_bytes = cache_dtypes(setup)
    assert {t.element_size() for t in tensors[0::2]} == {key_bytes}
    assert {t.element_size() for t in tensors[1::2]} == {value_bytes}
    assert measured == kv_cache_bytes(setup, rows(setup), prompt + completion - 1)
