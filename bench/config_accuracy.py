"""How well the readers read real configs and launch commands (tests/configs).

    .venv/bin/python bench/config_accuracy.py [--misses]

Prints recall (labelled fields read) and precision (reads that are right) per fact and
overall, the cases per format, and every wrong value with what the text says. --misses also
lists the labelled fields that were not read. The outcomes are computed by
tests/test_configs.py's runner, so this table and the test can never disagree.
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
    spec = importlib.util.spec_from_file_location("configs_runner", ROOT / "tests" / "test_configs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def _pct(num: int, den: int) -> str:
    return f"{num / den:6.1%}" if den else "     -"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--misses", action="store_true", help="also list labelled fields that were not read")
    args = parser.parse_args(argv)
    runner = _runner()
    results = runner.outcomes()
    formats = collections.Counter(case.format.split("+")[0] for case in runner.CASES)
    print(f"Config corpus: {len(results)} cases in {len(formats)} formats")
    print("  " + ", ".join(f"{name} {count}" for name, count in sorted(formats.items(), key=lambda kv: (-kv[1], kv[0]))))

    hits, misses, wrong, mismatched = (collections.Counter() for _ in range(4))
    for o in results:
        hits.update(o.hits)
        misses.update(o.misses)
        mismatched.update(o.mismatched)
        wrong.update(name for name, _ in o.wrong)
    names = sorted(set(hits) | set(misses) | set(wrong))
    print(f"\n{'fact':28}{'labelled':>9}{'read ok':>9}{'wrong':>7}{'recall':>9}{'precision':>11}")
    for name in names:
        labelled = hits[name] + misses[name] + mismatched[name]
        print(f"{name:28}{labelled:9}{hits[name]:9}{wrong[name]:7}{_pct(hits[name], labelled):>9}"
              f"{_pct(hits[name], hits[name] + wrong[name]):>11}")
    labelled_all = sum(o.labelled for o in results)
    hit_all, wrong_all = sum(hits.values()), sum(wrong.values())
    print(f"{'overall':28}{labelled_all:9}{hit_all:9}{wrong_all:7}{_pct(hit_all, labelled_all):>9}"
          f"{_pct(hit_all, hit_all + wrong_all):>11}")
    accepted = sum(len(o.accepted) for o in results)
    print(f"\n{accepted} further reads matched an `allowed` value (not counted).")

    print(f"\nWrong values ({wrong_all}):" if wrong_all else "\nWrong values: none")
    for o in results:
        for name, why in o.wrong:
            print(f"  {o.slug}: {name}: {why}")
    if args.misses:
        print("\nNot read:")
        for o in results:
            if o.misses:
                print(f"  {o.slug}: {', '.join(o.misses)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
