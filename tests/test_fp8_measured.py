"""torchao's FP8 training saves no 8-bit activations: checked on CPU (Float8Linear with emulate=True).

A tiny Llama's decoder linears are converted with ``convert_to_float8_training``; every tensor autograd
saves for backward is caught with ``saved_tensors_hooks``. None is 8-bit, the bytes saved equal those of
the same model without FP8, and the weights and their gradients keep the loaded dtype: what the
estimator says (``oomdoctor/estimate/fp8.py``), so its torchao figures equal the bf16 ones.
"""
from __future__ import annotations

from conftest import require

torch = require("torch")
transformers = require("transformers")
require("torchao")

from oomdoctor.estimate import Setup, estimate  # noqa: E402
from test_estimate import TINY  # noqa: E402

FP8_DTYPES = {torch.float8_e4m3fn, torch.float8_e5m2}


def _saved(convert: bool) -> tuple[int, set, object]:
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    cfg = transformers.LlamaConfig(hidden_size=TINY.hidden, intermediate_size=TINY.intermediate,
                                   num_attention_heads=TINY.heads, num_key_value_heads=TINY.kv_heads,
                                   num_hidden_layers=TINY.layers, vocab_size=TINY.vocab)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    if convert:
        convert_to_float8_training(model, config=Float8LinearConfig(emulate=True),
                                   module_filter_fn=lambda module, name: name != "lm_head")
    storages: dict[int, int] = {}
    dtypes: set = set()

    def pack(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        dtypes.add(t.dtype)
        return t

    ids = torch.randint(0, TINY.vocab, (2, 32))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    return sum(storages.values()), dtypes, model


def test_float8_linear_saves_its_high_precision_input_and_keeps_the_weights():
    plain, _, _ = _saved(convert=False)
    converted, dtypes, model = _saved(convert=True)
    from torchao.float8.float8_linear import Float8Linear

    assert any(isinstance(m, Float8Linear) for m in model.modules())
    assert not dtypes & FP8_DTYPES
    assert converted == plain
    weight = model.model.layers[0].mlp.down_proj.weight
    assert weight.dtype == weight.grad.dtype == torch.bfloat16
    fp8 = estimate(Setup(model=TINY, method="full", fp8="torchao", seq_len=32, batch_size=2))
    bf16 = estimate(Setup(model=TINY, method="full", seq_len=32, batch_size=2))
    for part in ("weights", "gradients", "optimizer", "logits"):
        assert fp8.breakdown[part] == bf16.breakdown[part]
