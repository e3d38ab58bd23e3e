"""Accuracy of the diagnosis on the evidence corpus (tests/corpus).

    .venv/bin/python bench/corpus_accuracy.py [--one-shot] [--blind] [--blind-set N]

Prints the confusion matrix of what ran out (oom_kind), top-1 and top-3 accuracy
per labelled scenario, fact exactness, and every miss with what was diagnosed
instead. Cases with `needs_answer` are judged on the consultation's report unless
--one-shot is given; --blind keeps only the cases whose sidecar says `blind: true`
(added, with their labels, before the service was first run on them). The outcomes are computed by tests/test_corpus.py's runner,
so this table and the test can never disagree.
"""
from __future__ import annotations

import argparse
import collections
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KINDS = ("gpu", "host", "not_memory", "unknown")


def _runner():
    spec = importlib.util.spec_from_file_location("corpus_runner", ROOT / "tests" / "test_corpus.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def _one_shot(outcome):
    """The same outcome judged on the one-shot reply."""
    from dataclasses import replace
    return replace(outcome, got_kind=outcome.one_shot_kind, top=outcome.one_shot_top, mode="one-shot")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one-shot", action="store_true", help="judge needs_answer cases without the consultation")
    parser.add_argument("--blind", action="store_true", help="only the cases labelled blind: true")
    parser.add_argument("--blind-set", type=int, metavar="N", help="only the cases labelled blind_set: N")
    args = parser.parse_args(argv)
    runner = _runner()
    if args.blind_set is not None:
        results = [runner.run_case(*case) for case in runner.CASES if case[1].get("blind_set") == args.blind_set]
    elif args.blind:
        results = [runner.run_case(*case) for case in runner.CASES if case[1].get("blind")]
    else:
        results = list(runner.outcomes())
    if args.one_shot:
        results = [_one_shot(o) for o in results]
    n = len(results)

    print(f"OOM Doctor on the corpus: {n} cases "
          f"({sum(o.mode == 'consultation' for o in results)} judged after a consultation)\n")
    print("oom_kind confusion (rows: labelled, columns: diagnosed)")
    matrix = collections.Counter((o.kind, o.got_kind) for o in results)
    print("".ljust(12) + "".join(k.rjust(12) for k in KINDS))
    for row in KINDS[:-1]:
        print(row.ljust(12) + "".join(str(matrix[(row, col)]).rjust(12) for col in KINDS))
    kind_ok = sum(o.kind_ok for o in results)
    top1 = sum(o.top1_ok for o in results)
    top3 = sum(o.top3_ok for o in results)
    labelled = {slug for slug, label, _ in runner.CASES if label.get("facts") or label.get("wording")}
    with_facts = [o for o in results if o.slug in labelled]
    facts_ok = sum(not o.fact_errors for o in with_facts)
    print(f"\noom_kind right: {kind_ok}/{n} = {kind_ok / n:.1%} (target {runner.KIND_TARGET:.0%})")
    print(f"scenario top-1: {top1}/{n} = {top1 / n:.1%}")
    print(f"scenario top-3: {top3}/{n} = {top3 / n:.1%} (target {runner.TOP3_TARGET:.0%})")
    print(f"facts exact:    {facts_ok}/{len(with_facts)} cases that show them\n")

    print("per scenario (labelled cases: top-1, top-3)")
    by_scenario: dict[str, list] = collections.defaultdict(list)
    for o in results:
        by_scenario[o.scenario].append(o)
    width = max(len(s) for s in by_scenario) + 2
    for scenario in sorted(by_scenario):
        cases = by_scenario[scenario]
        t1, t3 = sum(o.top1_ok for o in cases), sum(o.top3_ok for o in cases)
        print(f"  {scenario.ljust(width)}{len(cases):>3}   top-1 {t1}/{len(cases)}   top-3 {t3}/{len(cases)}")

    second = [o for o in results if o.top3_ok and not o.top1_ok]
    print(f"\nlabelled cause second or third ({len(second)})")
    for o in second:
        print(f"  {o.slug} [{o.mode}]: labelled {o.scenario}; diagnosed {', '.join(o.top[:3])}")

    misses = [o for o in results if not (o.kind_ok and o.top3_ok and not o.fact_errors)]
    print(f"\nmisses ({len(misses)})")
    for o in misses:
        got = ", ".join(o.top[:3]) or "(no diagnosis)"
        print(f"  {o.slug} [{o.mode}]")
        print(f"      labelled {o.kind}/{o.scenario}; diagnosed {o.got_kind}: {got}")
        if o.asked:
            print(f"      questions asked: {', '.join(o.asked)}")
        for error in o.fact_errors:
            print(f"      fact: {error}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
