"""Command line: `diagnose` a file, `estimate` a set-up, `chat` in the terminal, or serve the `mcp` tools.

`mcp` is parsed here and served by the MCP channel, which `python -m oomdoctor` hands in
(`main(commands=...)`): a channel never imports another."""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Callable, Sequence, TextIO

from .. import knowledge
from ..consultation import default
from ..language import LANGUAGES
from ..render import bars
from ..named_inputs import IMPLIES, INPUTS, InputSpec, describe
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
        try:
            with open(source, "rb") as fh:
                data = fh.read(MAX_INPUT_BYTES + 1)
        except FileNotFoundError:
            raise SystemExit(f"error: no such file: {source}") from None
        except IsADirectoryError:
            raise SystemExit(f"error: {source} is a folder; give a text file") from None
        except OSError as exc:
            raise SystemExit(f"error: cannot read {source}: {exc.strerror or exc}") from None
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
    for row in bars.table(est, kb, lang, verdict=False):
        out.write(f"  {row}\n")
    host = t('report.host_ram', value=show(est['host_ram_gib']))
    if est.get("host_capacity_gib"):
        host += f" / {t('report.host_capacity', value=show(est['host_capacity_gib']))} — " + \
            (t("report.fits") if est["host_fits"] else t("report.does_not_fit"))
    out.write(f"  {host}\n")
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


def _flag_help(spec: InputSpec) -> str:
    if spec.name == "config":
        return "path to the model's config.json (instead of --model)"
    parts = [spec.text]
    if spec.values:
        parts.append("one of: " + ", ".join(spec.values))
    elif spec.type == "list":
        parts.append("comma-separated")
    if spec.unit and spec.unit.lower() not in spec.text.lower():
        parts.append(f"in {spec.unit}")
    if spec.name in IMPLIES:
        other, value = IMPLIES[spec.name]
        parts.append(f"implies --{other} {value}")
    if spec.defaults:
        parts.append("default: " + ", else ".join(_default(value, when) for value, when in spec.defaults))
    return "; ".join(parts).replace("%", "%%")


def _default(value: object, when: dict) -> str:
    shown = ",".join(value) if isinstance(value, list) else str(value).lower() if isinstance(value, bool) else value
    shown = shown if shown != "" else "none"
    condition = " and ".join(f"--{k.replace('_', '-')} {'/'.join(str(v).lower() for v in vs)}" for k, vs in when.items())
    return f"{shown} with {condition}" if condition else str(shown)


def _metavar(spec: InputSpec) -> str:
    if spec.values:
        return "{" + ",".join(spec.values) + "}" if len(spec.values) <= 6 else "NAME"
    return {"integer": "N", "number": "X", "boolean": "{true,false}", "list": "A,B"}.get(spec.type, "TEXT")


def parser() -> argparse.ArgumentParser:
    kb = knowledge.default()
    top = argparse.ArgumentParser(prog="python -m oomdoctor", description="Diagnose LLM fine-tuning out-of-memory failures.")
    sub = top.add_subparsers(dest="command", required=True)
    d = sub.add_parser("diagnose", help="diagnose a pasted log or config (no questions; assumptions stated)")
    d.add_argument("file", nargs="?", default="-", help="file to read, or - for standard input")
    d.add_argument("--json", action="store_true", help="print the whole reply as JSON instead of the text report")
    d.add_argument("--lang", choices=LANGUAGES, help="reply language (default: the text's)")
    e = sub.add_parser("estimate", help="estimate memory for a set-up",
                       description="Estimate GPU and host memory for a fine-tuning set-up. Give the model "
                                   "(--model, --params-b or --config); every other input has a stated default.",
                       epilog="Example: python -m oomdoctor estimate --model llama-3-8b --method lora "
                              "--batch-size 4 --seq-len 2048 --gpu 4090")
    e.add_argument("--json", action="store_true", help="print the reply as JSON (estimate, breakdown, what-if, "
                                                       "assumptions) instead of the text summary")
    e.add_argument("--lang", choices=LANGUAGES, help="reply language (default: en)")
    for spec in describe(kb):
        flag = "--" + spec.name.replace("_", "-")
        e.add_argument(flag, dest=spec.name, type=_TYPES.get(spec.type, str), help=_flag_help(spec),
                       metavar=_metavar(spec))
    c = sub.add_parser("chat", help="an interactive consultation in the terminal")
    c.add_argument("--lang", choices=LANGUAGES, help="reply language (default: the text's)")
    m = sub.add_parser("mcp", help="serve the MCP tools over stdio, for an assistant (see README: MCP)")
    m.add_argument("--database", help="the database consultations are stored in: an SQLite file or a postgresql:// URL "
                                      "(default: OOMDOCTOR_DATABASE, the one the web service uses)")
    return top


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         commands: dict[str, Callable[[argparse.Namespace, TextIO], int]] | None = None) -> int:
    args = parser().parse_args(argv)
    out = out or sys.stdout
    handlers = {"diagnose": cmd_diagnose, "estimate": cmd_estimate, "chat": cmd_chat, **(commands or {})}
    if args.command not in handlers:
        raise SystemExit(f"error: '{args.command}' is served by `python -m oomdoctor {args.command}`")
    handler = handlers[args.command]
    try:
        return handler(args, out)
    except BrokenPipeError:
        # `... | head`: the reader has gone; say nothing more (not even at exit, when stdout is flushed)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
