"""scripts/build_catalog.py reads configs that transformers printed into a text file (notes, READMEs)."""
import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "build_catalog", Path(__file__).resolve().parents[1] / "scripts" / "build_catalog.py")
build_catalog = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_catalog)

NOTES = """\
# 7b
LlamaConfig {
  "_name_or_path": "org/model-7b",
  "hidden_size": 4096,
  "rope_scaling": {
    "factor": 8.0,
    "rope_type": "llama3"
  },
  "vocab_size": 32000
}

# 13b
LlamaConfig {
  "_name_or_path": "org/model-13b",
  "hidden_size": 5120,
  "vocab_size": 32000
}
"""


def test_a_printed_config_is_picked_out_by_its_name_with_nested_objects_whole():
    config = build_catalog._printed_config(NOTES, "org/model-7b")
    assert config["hidden_size"] == 4096
    assert config["rope_scaling"] == {"factor": 8.0, "rope_type": "llama3"}
    assert build_catalog._printed_config(NOTES, "org/model-13b")["hidden_size"] == 5120


def test_a_name_printed_twice_or_not_at_all_is_refused():
    with pytest.raises(KeyError):
        build_catalog._printed_config(NOTES + NOTES, "org/model-7b")
    with pytest.raises(KeyError):
        build_catalog._printed_config(NOTES, "org/model-70b")


TYPED_FINE_TUNE = {
    "id": "org-distill-1b", "family": "x", "size": "1B", "hf_id": "org/distill-1b", "names": ["distill-1b"],
    "model_type": "qwen2", "layers": 2, "hidden": 256, "heads": 4, "kv_heads": 2, "head_dim": 64,
    "intermediate": 512, "vocab": 1000, "tied_embeddings": False, "attention_bias": True, "o_bias": False,
    "mlp_bias": False, "norm": "rmsnorm", "max_position": 4096,
    "source": "https://huggingface.co/org/distill-1b/blob/main/config.json",
}
BASE_COPY = {"model_type": "qwen2", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000, "tie_word_embeddings": False,
             "max_position_embeddings": 4096}
ITEM = {"id": "org-distill-1b", "base": "org/base-1b"}


def test_a_base_copy_stands_for_its_fine_tune_only_when_the_typed_figures_agree():
    build_catalog.check_base(ITEM, {"config": BASE_COPY}, {"org-distill-1b": TYPED_FINE_TUNE})
    # a base that ties its embeddings (Qwen2.5-1.5B) is not the fine-tune that unties them (R1-Distill-Qwen-1.5B)
    with pytest.raises(ValueError, match="tied_embeddings"):
        build_catalog.check_base(ITEM, {"config": {**BASE_COPY, "tie_word_embeddings": True}},
                                 {"org-distill-1b": TYPED_FINE_TUNE})
    with pytest.raises(ValueError, match="max_position"):
        build_catalog.check_base(ITEM, {"config": {**BASE_COPY, "max_position_embeddings": 32768}},
                                 {"org-distill-1b": TYPED_FINE_TUNE})
    with pytest.raises(ValueError, match="typed figures"):
        build_catalog.check_base(ITEM, {"config": BASE_COPY}, {})


TITLED = """\
Model-7B
{
  "hidden_size": 4096,
  "rope_scaling": {"factor": 8.0}
}

Model-7B-Instruct
{"hidden_size": 4096, "vocab_size": 32000}
"""


def test_a_config_pasted_under_the_line_naming_it_is_read_whole_and_only_for_that_exact_line():
    assert build_catalog._titled_config(TITLED, "Model-7B") == {"hidden_size": 4096, "rope_scaling": {"factor": 8.0}}
    assert build_catalog._titled_config(TITLED, "Model-7B-Instruct")["vocab_size"] == 32000
    with pytest.raises(KeyError):
        build_catalog._titled_config(TITLED + TITLED, "Model-7B")
    with pytest.raises(KeyError):
        build_catalog._titled_config("Model-7B\nno config here\n{\"a\": 1}", "Model-7B")


def test_a_trimmed_table_is_trusted_only_where_its_entries_give_the_full_copies_counts():
    from oomdoctor.catalog.models import catalog_config

    # gpu_poor keeps hidden_size, intermediate_size, heads, layers and vocab: GPT-NeoX is sized by them alone
    pythia = {"architectures": ["GPTNeoXForCausalLM"], "hidden_size": 1024, "intermediate_size": 4096,
              "num_attention_heads": 16, "num_hidden_layers": 24, "vocab_size": 50304}
    trimmed, full = build_catalog.trimmed_and_full("gpt_neox", pythia, catalog_config("pythia-410m"))
    assert trimmed == full
    # a T5 entry without feed_forward_proj reads as T5 v1.0's ReLU feed-forward, not Flan-T5's gated GELU
    flan = {"architectures": ["T5ForConditionalGeneration"], "d_ff": 2816, "d_model": 1024, "num_heads": 16,
            "num_layers": 24, "vocab_size": 32128}
    trimmed, full = build_catalog.trimmed_and_full("t5", flan, catalog_config("flan-t5-large"))
    assert trimmed[0] < full[0]


def test_a_value_cut_for_a_test_is_restored_only_where_the_copy_has_it_and_with_its_source():
    copy = {"model_type": "llava_next", "vision_config": {"num_hidden_layers": 2, "hidden_size": 1024}}
    item = {"id": "m", "set": {"vision_config.num_hidden_layers": 24}, "set_source": "the line's own comment"}
    out = build_catalog._set_keys(item, copy)
    assert out["vision_config"]["num_hidden_layers"] == 24
    assert copy["vision_config"]["num_hidden_layers"] == 2          # the copy read is left as it was
    with pytest.raises(ValueError, match="set_source"):
        build_catalog._set_keys({"id": "m", "set": {"vision_config.num_hidden_layers": 24}}, copy)
    with pytest.raises(ValueError, match="does not have"):
        build_catalog._set_keys({**item, "set": {"vision_config.depth": 24}}, copy)


def test_every_vendored_copy_is_listed_with_the_repository_it_was_read_from():
    import yaml

    root = Path(__file__).resolve().parents[1]
    data = yaml.safe_load((root / "knowledge" / "catalog_sources.yaml").read_text(encoding="utf-8"))
    listed = {item["vendored"]: item for item in data["configs"] if item.get("vendored")}
    on_disk = {p.name for p in (root / "knowledge" / "catalog_configs").glob("*.json")}
    assert listed and set(listed) == on_disk
    for item in listed.values():
        assert item["from"] in data["sources"] and item["path"]
