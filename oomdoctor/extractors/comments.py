"""Comments in pasted configs, scripts and programs.

A `#` line in YAML, a shell script or Python is off: `# eval_steps: 500`, `#     model =
torch.compile(model)` and `# --deepspeed ds_z3.json \\` say what the run does NOT do. Readers
of keys and flags drop every comment (`uncommented`); readers of words keep the prose a
comment holds ("# optimize for RTX 4070Ti") and drop only comments whose body is itself a
setting or code (`without_disabled`), since that is what would be read as a setting.

Scheduler directives look like comments and are not: `#SBATCH --gres=gpu:4` and `#PBS -l`
are what the batch system runs with. A shebang (`#!/bin/bash`) is no comment either. Offsets
are kept (blanked with spaces), so details quoted from the text still point at it.
"""
from __future__ import annotations

import functools
import re

# A comment line: optional indentation, then '#', not a shebang or a scheduler directive.
_LINE = re.compile(r"^([ \t]{0,40})#(?!!|SBATCH\b|PBS\b|BSUB\b)([^\n]{0,2000})$", re.MULTILINE)
# A comment after code on the same line: a blank, then '#'.
_TRAILING = re.compile(r"([ \t])#(?!!)([^\n]{0,2000})$", re.MULTILINE)

# What a comment's body looks like when it is a setting or code rather than prose:
_SETTING = re.compile(
    # `eval_steps: 500`, `bf16=bf16,`, `"fp16": true`, `model = torch.compile(model)`, `args.bf16 = True`
    r"""^["']?[A-Za-z_][\w.\[\]'"-]{0,80}["']?[ \t]{0,4}(?::|=(?!=))[ \t]{0,4}(?:\S{1,200}[ \t]{0,4}(?:\\|,)?|\S{0,80}\([^\n]{0,200})$"""
    # `--deepspeed ds.json \`, `-n 4`
    r"""|^--?[A-Za-z][\w-]{0,60}(?:[ =][^\n]{0,200})?$"""
    # `trainer.train()`, `model.gradient_checkpointing_enable()`, `torch.compile(model)`
    r"""|^[A-Za-z_][\w.]{0,80}\([^\n]{0,200}\)[ \t]{0,4}[,;]?$"""
    # `if torch.__version__ >= "2" and ...:`, `import deepspeed`, `from peft import LoraConfig`
    r"""|^(?:if|elif|else|for|while|with|def|return)\b[^\n]{0,200}:$|^(?:import|from)[ \t]{1,4}[\w.]{1,80}(?:[ \t]{1,4}import\b[^\n]{0,200})?$"""
    # `meta-llama/Llama-3.1-70B-Instruct`: a value on its own, an alternative left commented out
    r"""|^[\w.-]{1,100}/[\w./-]{1,200}$"""
)


def _blank(m: re.Match) -> str:
    return " " * len(m.group(0))


@functools.lru_cache(maxsize=4)
def uncommented(text: str) -> str:
    """Every comment blanked, offsets kept: for the readers of keys, flags and launch lines."""
    text = _LINE.sub(lambda m: m.group(1) + " " * (len(m.group(0)) - len(m.group(1))), text)
    return _TRAILING.sub(_blank, text)


def _is_setting(body: str) -> bool:
    body = body.strip().lstrip("#").strip()
    body = re.split(r"[ \t]#", body, maxsplit=1)[0].strip()  # `bf16=bf16, #(on an A100)`: the note after it
    return bool(body) and _SETTING.match(body) is not None


@functools.lru_cache(maxsize=4)
def without_disabled(text: str) -> str:
    """The comments whose body is a setting or code blanked, prose comments kept: for every reader."""
    if "#" not in text:
        return text

    def line(m: re.Match) -> str:
        return _blank(m) if _is_setting(m.group(2)) else m.group(0)

    def trailing(m: re.Match) -> str:
        return m.group(1) + " " * (len(m.group(0)) - 1) if _is_setting(m.group(2)) else m.group(0)

    return _TRAILING.sub(trailing, _LINE.sub(line, text))
