"""Which channels carry each estimator input (issue #13): the matrix tests/test_input_channels.py checks.

    .venv/bin/python bench/input_channels.py

One row per named input (oomdoctor/named_inputs.py, described from knowledge/facts.yaml): the CLI
flag, the REST field, the MCP argument, the readers of pasted text, the follow-up questions, whether
it moves a figure of the estimate (at its peak) or its verdict on the card and host given, whether
a derivation line shows it in English and in Chinese, and the derivation texts it brings. The rows
are computed by the test module, so the table and the test cannot disagree.
Written to bench/results/input_channels-<date>.txt.
"""
from __future__ import annotations

import importlib.util
import sys

from common import ROOT, Report


def _tests():
    sys.path.insert(0, str(ROOT / "tests"))
    spec = importlib.util.spec_from_file_location("input_channels_runner", ROOT / "tests" / "test_input_channels.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _mark(flag: bool) -> str:
    return "yes" if flag else "-"


def main() -> None:
    rows = _tests().matrix()
    report = Report("input_channels")
    report.say(f"{len(rows)} named inputs; columns: CLI flag, REST field, MCP argument, readers, questions, "
                "moves a figure, moves the verdict, derivation shown (en, zh), derivation texts it brings")
    report.say("")
    report.say("| input | fact | CLI | REST | MCP | readers | questions | moves | verdict | en | zh | derivation texts |")
    report.say("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        report.say(f"| {r['input']} | {r['fact']} | {_mark(r['cli'])} | {_mark(r['rest'])} | {_mark(r['mcp'])} | "
                    f"{', '.join(r['readers']) or '-'} | {', '.join(r['questions']) or '-'} | {_mark(r['moves'])} | {_mark(r['verdict'])} | "
                    f"{_mark(r['shown_en'])} | {_mark(r['shown_zh'])} | "
                    f"{', '.join(k.removeprefix('derive.') for k in r['lines'][:4]) or '-'} |")
    report.say("")
    missing = {c: [r["input"] for r in rows if not r[c]] for c in ("cli", "rest", "mcp", "readers")}
    report.say("inputs without a channel: " + "; ".join(f"{c}: {', '.join(v) or 'none'}" for c, v in missing.items()))
    report.say(f"inputs with a follow-up question: {sum(bool(r['questions']) for r in rows)} of {len(rows)}")
    report.save()


if __name__ == "__main__":
    main()
