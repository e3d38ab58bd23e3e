"""The kept-logits figures against a real Trainer.evaluate (runs where torch is installed).

A tiny LlamaForCausalLM (random weights, nothing downloaded) is evaluated on CPU
with ``compute_metrics`` set; ``EvalLoopContainer.add`` is wrapped to record
how many bytes of predictions and labels the Trainer holds after each step, and
``compute_metrics`` records what reaches the host.
"""
from __future__ import annotations

import pytest

from conftest import require

torch = require("torch")
transformers = require("transformers")

from oomdoctor.estimate import Setup  # noqa: E402
from oomdoctor.estimate.evaluation import evaluation  # noqa: E402
from test_estimate import TINY  # noqa: E402

SAMPLES, S, BATCH = 10, 16, 4


class _Rows(torch.utils.data.Dataset):
    def __len__(self):
        return SAMPLES

    def __getitem__(self, i):
        ids = torch.randint(0, TINY.vocab, (S,))
        return {"input_ids": ids, "labels": ids}


def _evaluate(tmp_path, accumulation):
    from transformers.trainer_pt_utils import EvalLoopContainer

    held: dict[int, int] = {}
    original = EvalLoopContainer.add

    def add(self, tensors):
        original(self, tensors)
        t = self.tensors
        if isinstance(t, torch.Tensor) and t.dim() > 1:     # predictions and labels, not the per-step losses
            held[id(self)] = max(held.get(id(self), 0), t.untyped_storage().nbytes())

    host = {}

    def metrics(pred):
        host["bytes"] = pred.predictions.nbytes + pred.label_ids.nbytes
        return {}

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=TINY.hidden, intermediate_size=TINY.intermediate,
                                   num_attention_heads=TINY.heads, num_key_value_heads=TINY.kv_heads,
                                   num_hidden_layers=TINY.layers, vocab_size=TINY.vocab)
    model = transformers.LlamaForCausalLM(cfg)
    args = transformers.TrainingArguments(output_dir=str(tmp_path), per_device_eval_batch_size=BATCH, use_cpu=True,
                                          report_to=[], eval_accumulation_steps=accumulation)
    trainer = transformers.Trainer(model=model, args=args, eval_dataset=_Rows(), compute_metrics=metrics)
    EvalLoopContainer.add = add
    try:
        trainer.evaluate()
    finally:
        EvalLoopContainer.add = original
    return sum(held.values()), host["bytes"]


@pytest.mark.parametrize("accumulation", [None, 2])
def test_kept_predictions_match_the_trainer(tmp_path, accumulation):
    gpu, host = _evaluate(tmp_path, accumulation)
    ev = evaluation(Setup(model=TINY, method="full", load_dtype="fp32", precision="fp32", seq_len=S,
                          eval_batch_size=BATCH, eval_compute_metrics=True, eval_samples=SAMPLES,
                          eval_accumulation_steps=accumulation), p=4)
    # the estimate's peak is the concatenation (old and new together): twice what stays held
    assert ev.kept_peak / 2 == gpu
    assert ev.host / (2 if accumulation else 1) == host
