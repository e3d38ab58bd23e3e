"""Command line: `diagnose` a file, `estimate` a set-up, or `chat` in the terminal."""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Sequence, TextIO

from .. import knowledge
from ..consultation import default
from ..language import LANGUAGES
from ..named_inputs import INPUTS
from ..service import Consultations, EstimateInputError
from ..storage import Store
from ..templating import show

CHANNEL = "cli"


def _service(database: str = "") -> Consultations:
    """The service for one command. Only `chat` stores anything, in a scratch database of its own;
    `diagnose` and `estimate` never open one."""
    return Consultations(default(), lambda: Store(database))

MAX_INPUT_BYTES = 16 * 2**20


def _read(source: str) -> str:
    if source == "-":
        data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    else:
        with open(source, "rb") as fh:
            data = fh.read(MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        raise SystemExit(f"error: input is larger than {MAX_INPUT_BYTES} bytes")
    if b"\x00" in data:
        raise SystemExit("error: input contains NUL bytes; give a text file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SystemExit("error: input is not UTF-8 text") from None


def cmd_diagnose(args: argparse.Namespace, out: TextIO) -> int:
    text = _read(args.file)
    if not text.strip():
        raise SystemExit("error: input is empty")
    reply = _service().diagnose(text, args.lang)
    if args.json:
        json.dump(reply, out, ensure_ascii=False, indent=2)
        out.write("\n")
    else:
        out.write(reply["text"] + "\n")
    return 0


def _bool(raw: str) -> bool:
    low = raw.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {raw!r}")


# A flag's type follows its fact's type in knowledge/facts.yaml.
_TYPES = {"integer": int, "number": float, "boolean": _bool}


def cmd_estimate(args: argparse.Namespace, out: TextIO) -> int:
    inputs = {name: getattr(args, name) for name in INPUTS if getattr(args, name, None) is not None}
    if inputs.get("config"):
        inputs["config"] = _read(inputs["config"])
    try:
        reply = _service().estimate(inputs, args.lang or "en")
    except EstimateInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        json.dump(reply, out, ensure_ascii=False, indent=2)
        out.write("\n")
        return 0
    est, kb, lang = reply["estimate"], knowledge.default(), reply["lang"]
    t = lambda key, **kw: kb.text(key, lang, **kw)  # noqa: E731
    line = t("report.per_gpu", value=show(est["per_gpu_gib"]))
    if est["gpu_capacity_gib"]:
        line += f" / {t('report.capacity', value=show(est['gpu_capacity_gib']))}"
        if est["fits"] is not None:
            line += " — " + (t("report.fits") if est["fits"] else t("report.does_not_fit"))
    out.write(line + "\n")
    for part, value in est["breakdown"].items():
        out.write(f"  {t('part.' + part):<24} {value:>8.2f} GiB\n")
    out.write(f"  {t('report.host_ram', value=show(est['host_ram_gib']))}\n")
    for remark in est["remarks"]:
        out.write(f"  {remark}\n")
    for derived in est["derivation"]:
        out.write(f"  · {derived}\n")
    if reply["assumptions"]:
        out.write(f"{t('report.assumptions')}:\n")
    for a in reply["assumptions"]:
        out.write(f"  - {a['text']}\n")
    return 0


def cmd_chat(args: argparse.Namespace, out: TextIO, inp: TextIO | None = None) -> int:
    """Paste text and finish it with an empty line; /new starts over, /quit leaves."""
    inp = inp or sys.stdin
    scratch = tempfile.TemporaryDirectory(prefix="oomdoctor-chat-")
    consultations = _service(os.path.join(scratch.name, "chat.sqlite3"))
    cid = None
    lang = args.lang
    out.write("OOM Doctor — paste a traceback, nvidia-smi output, a config or a sentence; end with an empty line.\n"
              "OOM Doctor —— 粘贴 traceback、nvidia-smi 输出、配置或一句话描述；以空行结束。\n")
    buffer: list[str] = []
    while True:
        out.write("> " if not buffer else "")
        out.flush()
        line = inp.readline()
        if line == "":
            if not buffer:
                return 0
        elif line.strip() in ("/quit", "/exit"):
            return 0
        elif line.strip() == "/new":
            cid, buffer = None, []
            continue
        elif line.strip() != "" or not buffer:
            if line.strip():
                buffer.append(line)
            continue
        text = "".join(buffer)
        buffer = []
        if cid is None:
            cid, reply = consultations.start(text, channel=CHANNEL, lang=lang)
        else:
            reply = consultations.reply(cid, text, lang, channel=CHANNEL)
        out.write("\n" + reply["text"] + "\n\n")
        if line == "":
            return 0


def parser() -> argparse.ArgumentParser:
    kb = knowledge.default()
    top = argparse.ArgumentParser(prog="python -m oomdoctor", description="Diagnose LLM fine-tuning out-of-memory failures.")
    sub = top.add_subparsers(dest="command", required=True)
    d = sub.add_parser("diagnose", help="diagnose a pasted log or config (no questions; assumptions stated)")
    d.add_argument("file", nargs="?", default="-", help="file to read, or - for standard input")
    d.add_argument("--json", action="store_true", help="print the reply as JSON")
    d.add_argument("--lang", choices=LANGUAGES)
    e = sub.add_parser("estimate", help="estimate memory for a set-up")
    e.add_argument("--json", action="store_true")
    e.add_argument("--lang", choices=LANGUAGES)
    for name in INPUTS:
        flag = "--" + name.replace("_", "-")
        help_text = "path to a config.json" if name == "config" else f"sets {INPUTS[name]}"
        e.add_argument(flag, dest=name, type=_TYPES.get(kb.facts[INPUTS[name]].type, str), help=help_text)
    c = sub.add_parser("chat", help="an interactive consultation in the terminal")
    c.add_argument("--lang", choices=LANGUAGES)
    return top


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    args = parser().parse_args(argv)
    out = out or sys.stdout
    handler = {"diagnose": cmd_diagnose, "estimate": cmd_estimate, "chat": cmd_chat}[args.command]
    try:
        return handler(args, out)
    except BrokenPipeError:
        # `... | head`: the reader has gone; say nothing more (not even at exit, when stdout is flushed)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
