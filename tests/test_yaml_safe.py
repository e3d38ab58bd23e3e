"""The package reads its YAML with the C safe loader where there is one: the same values as yaml.safe_load
from every YAML file the project ships, and the same refusals."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from oomdoctor import yaml_safe

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted(p for folder in ("knowledge", "rules", "slack", "deploy", "tests")
                 for p in (ROOT / folder).rglob("*.y*ml"))


def test_there_are_files_to_compare():
    assert len(SHIPPED) > 100 and any(p.parent.name == "knowledge" for p in SHIPPED)


def test_every_shipped_file_reads_as_safe_load_reads_it():
    differ = [str(p.relative_to(ROOT)) for p in SHIPPED
              if yaml_safe.load(p.read_text(encoding="utf-8")) != yaml.safe_load(p.read_text(encoding="utf-8"))]
    assert differ == []


@pytest.mark.parametrize("text", ["!!python/object/apply:os.system ['true']", "a: !!python/name:os.system",
                                  "x: !custom 1"])
def test_tags_beyond_plain_values_are_refused(text):
    with pytest.raises(yaml.YAMLError):
        yaml_safe.load(text)


def test_broken_text_is_a_yaml_error_with_its_line():
    with pytest.raises(yaml.YAMLError, match="line 2"):
        yaml_safe.load("a: 1\n b: [2\n")
