"""How OOM Doctor does on the scripted consultations (tests/conversations).

    .venv/bin/python bench/conversation_accuracy.py [--only FILE.yaml]

Prints the top-1 diagnosis rate, the first-remedy acceptable rate, the share of stated facts
understood, language flips and questions per consultation, then every miss; --only keeps
the consultations of one file of tests/conversations (blind.yaml: the blind set). The outcomes come
from tests/test_conversations.py's runner, so this table and the test never disagree.
"""
from __future__ import annotations

import argparse
import collections
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _runner():
    spec = importlib.util.spec_from_file_location("conversation_runner", ROOT / "tests" / "test_conversations.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", metavar="FILE", help="only the consultations of this file, e.g. blind.yaml")
    args = parser.parse_args(argv)
    runner = _runner()
    if args.only:
        scripts = [s for s in runner.load_scripts(held_out=True) if s.file == args.only]
        if not scripts:
            parser.error(f"no consultation comes from {args.only}")
        results = [runner.run(s) for s in scripts]
    else:
        results = list(runner.outcomes())
    f = runner.figures(results)
    print(f"OOM Doctor on {f['consultations']} scripted consultations ({f['chinese']} in Chinese)\n")
    print(f"top-1 diagnosis right       {f['top1']:.1%}   (target >= {runner.TOP1_TARGET:.0%})")
    print(f"first remedy acceptable     {f['remedy']:.1%}   (target >= {runner.REMEDY_TARGET:.0%})")
    print(f"stated facts understood     {f['facts_understood']}/{f['facts_stated']}"
          f" = {f['facts_understood'] / max(1, f['facts_stated']):.1%}   (target 100%)")
    print(f"language flips              {f['lang_flips']}   (target 0)")
    print(f"questions per consultation  {f['questions_mean']:.2f}   (target <= {runner.QUESTIONS_TARGET})")
    print(f"within the expert's budget  {f['within_budget']:.1%}   (target >= {runner.WITHIN_BUDGET_TARGET:.0%})")
    histogram = collections.Counter(o.questions for o in results)
    print("questions asked              " + ", ".join(f"{k}: {histogram[k]}" for k in sorted(histogram)))
    asked = collections.Counter(fact for o in results for fact, _ in o.asked)
    print("asked about                  " + ", ".join(f"{k} {v}" for k, v in asked.most_common()))
    unscripted = collections.Counter(fact for o in results for fact in o.unscripted)
    if unscripted:
        print("asked, no scripted answer    " + ", ".join(f"{k} {v}" for k, v in unscripted.most_common()))
    misses = [o for o in results if o.problems()]
    print(f"\nmisses: {len(misses)}")
    for o in misses:
        print(f"- {o.script.id} ({o.script.file}): " + "; ".join(o.problems()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
