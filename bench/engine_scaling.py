"""Rule-engine cost against the number of rules: the real rule set, then 10x and 100x larger.

The added rules cannot match the facts of a turn. Two kinds:

- "absent facts": every condition names a fact no turn has (syn.N). The engine's
  fact index never looks at them, so a turn should cost the same as with the real set;
- "present facts": conditions on facts most turns do have (oom.tried_gib, gpu.memory_gib,
  train.batch_size, ...) with values they never take. The engine has to test these,
  so their cost grows with their number: they are the rules that *can* match.

For every real log in tests/corpus it times `Engine.run` on the facts the extractors
find, and a whole consultation turn (`Consultant.take_turn`, which runs the engine once
for the report and again for each what-if of the question it chooses). Bounded: five
passes over the corpus per rule set; prints figures and writes bench/results/.

    .venv/bin/python bench/engine_scaling.py      # about a minute on 2 cores
"""
from __future__ import annotations

import time

from common import ROOT, Report

from oomdoctor import knowledge
from oomdoctor.consultation import Consultant, State
from oomdoctor.engine import Engine, Provenance, WorkingMemory, parse_rule
from oomdoctor.observation import observe
from oomdoctor.redaction import redact

KB = knowledge.default()
PRESENT = ["oom.tried_gib", "gpu.memory_gib", "oom.total_gib", "train.batch_size", "oom.free_gib", "train.seq_len"]


def synthetic(count: int, kind: str) -> list:
    vocabulary = knowledge.vocabulary(KB)
    vocabulary.facts |= {f"syn.{i}" for i in range(count)}
    scenario = next(iter(KB.scenarios))
    rules = []
    for i in range(count):
        if kind == "absent facts":
            when = [{"fact": f"syn.{i}", "eq": 1}, {"fact": f"syn.{(i + 1) % count}", "gt": 0}]
        else:
            when = [{"fact": PRESENT[i % len(PRESENT)], "lt": -1 - i}, {"fact": PRESENT[(i + 1) % len(PRESENT)], "gt": 1e12}]
        raw = {"id": f"synthetic_{kind[:6].replace(' ', '_')}_{i}", "when": when,
               "then": [{"conclude": {"scenario": scenario, "confidence": 0.1}}], "explain": {"en": "x", "zh": "x"}}
        rules.append(parse_rule(raw, "bench", vocabulary, len(KB.rules) + i))
    return rules


def corpus() -> list[str]:
    return [redact(p.read_text(encoding="utf-8")).text for p in sorted((ROOT / "tests" / "corpus").glob("*.log"))]


def memory_of(text: str) -> WorkingMemory:
    memory = WorkingMemory()
    for obs in observe(text, KB):
        memory.assert_fact(obs.name, obs.value, Provenance("extractor", obs.extractor))
    return memory


def best_of(passes: int, fn) -> float:
    best = float("inf")
    for _ in range(passes):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    report = Report("engine_scaling")
    texts = corpus()
    memories = [memory_of(t) for t in texts]
    real = list(KB.rules)
    n = len(real)
    report.say(f"# {n} real rules; {len(texts)} corpus logs, {sum(len(m) for m in memories) / len(memories):.1f} "
               f"extracted facts per log on average; best of 5 passes")
    report.say(f"{'rule set':<34}{'rules':>7}{'build ms':>10}{'run us/turn':>13}{'x real':>8}"
               f"{'firings':>9}{'turn ms':>9}{'x real':>8}")
    base_run = base_turn = None
    for label, extra in [("real", []),
                         ("real + 9x absent facts", synthetic(9 * n, "absent facts")),
                         ("real + 99x absent facts", synthetic(99 * n, "absent facts")),
                         ("real + 9x present facts", synthetic(9 * n, "present facts")),
                         ("real + 99x present facts", synthetic(99 * n, "present facts"))]:
        rules = real + extra
        start = time.perf_counter()
        engine = Engine(rules)
        build = time.perf_counter() - start
        firings = sum(len(engine.run(m).firings) for m in memories) / len(memories)
        run = best_of(5, lambda: [engine.run(m) for m in memories]) / len(memories)
        consultant = Consultant(KB)
        consultant.engine = engine
        turn = best_of(5, lambda: [consultant.take_turn(State(), t) for t in texts]) / len(texts)
        base_run = base_run or run
        base_turn = base_turn or turn
        report.say(f"{label:<34}{len(rules):>7}{build * 1e3:>10.1f}{run * 1e6:>13.0f}{run / base_run:>8.2f}"
                   f"{firings:>9.1f}{turn * 1e3:>9.2f}{turn / base_turn:>8.2f}")
    report.say("\n# 'absent facts' rules are never looked at during a run (the engine indexes rules by fact);")
    report.say("# 'present facts' rules are tested whenever their facts are there: their cost is linear in their number.")
    report.save()


if __name__ == "__main__":
    main()
