"""tests/corpus/README.md's counts are the corpus's own (they were typed once and went stale)."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("corpus_counts", ROOT / "bench" / "corpus_counts.py")
counts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(counts)


def test_the_readme_counts_are_the_corpus_counts():
    readme = counts.README.read_text(encoding="utf-8")
    section = readme[readme.index(counts.BEGIN):readme.index(counts.END) + len(counts.END)]
    assert section == counts.section(), "run: python bench/corpus_counts.py --write"


def test_every_case_is_counted_once():
    section = counts.section()
    total = int(section.split("Total cases: ", 1)[1].split()[0])
    assert total == len(list(counts.CORPUS.glob("*.yaml"))) > 0
    kinds = section.split("| oom_kind | cases |", 1)[1].split("\n\n", 1)[0]
    assert sum(int(row.rsplit("|", 2)[1]) for row in kinds.splitlines()[2:]) == total
