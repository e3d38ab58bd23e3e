"""Coverage-guided fuzzing of the extractors and of the redaction, with atheris.

Not part of the test suite (atheris is optional). Run it for a bounded time:

    .venv/bin/pip install atheris
    .venv/bin/python fuzz/extractors_fuzz.py -max_total_time=300 -dict=fuzz/extractors.dict fuzz/corpus

Each input is decoded as UTF-8 (invalid bytes replaced) and given to every
extractor, to `observe` (which keeps only facts their spec accepts) and to
`redact`. A crash is any exception, a fact the knowledge base does not know, a
value its spec refuses, NaN or infinity, or a redaction that is not idempotent.
Without a corpus folder the project's log fixtures seed fuzz/corpus/; libFuzzer
adds what it learns there and writes a crashing input to fuzz/crash-*
(both ignored by git). Reproduce one with `fuzz/extractors_fuzz.py fuzz/crash-...`.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import atheris

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

with atheris.instrument_imports():
    from oomdoctor import knowledge
    from oomdoctor.extractors import registry
    from oomdoctor.observation import observe
    from oomdoctor.redaction import redact

KB = knowledge.default()
EXTRACTORS = registry()
NEEDS_KB = {"symptoms", "config_keys"}


# Faults found and reported, not yet fixed in the extractor (docs/hardening.md, "Open"); skipped here so
# that a run goes on looking for others. Remove an entry when its test in tests/test_fuzz_extractors.py passes.
KNOWN: set[tuple[str, type]] = set()


def _known(extractor: str, value) -> bool:
    return (extractor, type(value)) in KNOWN


def _accepts(name: str, value) -> bool:
    spec = KB.facts[name]
    if spec.type == "number" and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return spec.accepts(value)


def test_one_input(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    for extractor in EXTRACTORS:
        findings = list(extractor.run(text, KB) if extractor.name in NEEDS_KB else extractor.run(text))
        for finding in findings:
            if finding.name not in KB.facts:
                raise AssertionError(f"{extractor.name} produced unknown fact {finding.name}")
            if finding.name != "model.config" and not _accepts(finding.name, finding.value) \
                    and not _known(extractor.name, finding.value):
                raise AssertionError(f"{extractor.name}: {finding.name} = {finding.value!r} is not accepted")
    for obs in observe(text, KB):
        if obs.name != "model.config" and not _accepts(obs.name, obs.value):
            raise AssertionError(f"observe kept {obs.name} = {obs.value!r}")
    once = redact(text)
    if redact(once.text).text != once.text:
        raise AssertionError("redaction is not idempotent")


def main() -> None:
    args = list(sys.argv)
    if not any(a.startswith("-artifact_prefix=") for a in args):
        args.insert(1, f"-artifact_prefix={ROOT / 'fuzz'}/")  # crash files land in fuzz/, ignored by git
    # With no corpus folder given, start from the project's fixtures (copied, so libFuzzer may add to it).
    if not any(not a.startswith("-") for a in args[1:]):
        corpus = ROOT / "fuzz" / "corpus"
        corpus.mkdir(exist_ok=True)
        for path in sorted((ROOT / "tests" / "fixtures" / "logs").glob("*.txt")):
            target = corpus / path.name
            if not target.exists():
                target.write_bytes(path.read_bytes())
        args.append(str(corpus))
    atheris.Setup(args, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
