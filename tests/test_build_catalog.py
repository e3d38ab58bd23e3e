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
