"""Values that launch scripts and training scripts give by name: `$NPROC`, `${lr}`,
`$(expr 64 / $n)`, `$(( A * B ))`, `BATCH_SIZE // MICRO_BATCH_SIZE`.

A name counts only where the same paste defines it, once (`nproc_per_node=2`,
`MICRO_BATCH_SIZE = 4`, `export NNODES=2`); arithmetic is read by a small parser over
numbers, names and + - * / // % ( ), never evaluated as code. Anything else stays unknown.
"""
from __future__ import annotations

import functools
import re
from fractions import Fraction

# `NAME=value` as a shell assignment or an environment prefix (`NPROC_PER_NODE=8 swift sft`),
# anywhere a word starts; the value runs to the next blank, `;` or full-width punctuation unless it is quoted.
_SHELL = re.compile(r"""(?<![\w$.-])(?:export[ \t]{1,4})?([A-Za-z_][A-Za-z0-9_]{0,60})=("[^"\n]{0,200}"|'[^'\n]{0,200}'|[^\s"';，。；：）]{0,200})""")
# `NAME = value` on an unindented line of a Python script (constants at module level).
_PYTHON = re.compile(r"^([A-Za-z_][A-Za-z0-9_]{0,60})[ \t]{1,4}=[ \t]{1,4}([^\n]{1,200})$", re.MULTILINE)
_TOKEN = re.compile(r"\s*(\d{1,15}(?:\.\d{1,10})?|\$\{[A-Za-z_]\w{0,60}\}|\$[A-Za-z_]\w{0,60}|[A-Za-z_]\w{0,60}|//|[-+*/%()])")
_MAX_DEPTH = 8
_MAX_TOKENS = 64


def _unquote(raw: str) -> str:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        return raw[1:-1]
    return raw


def _without_comment(raw: str) -> str:
    """`1  # If 2 nodes...` -> `1`: a '#' after a blank starts a comment."""
    cut = re.search(r"\s#", raw)
    return raw[: cut.start()] if cut else raw


@functools.lru_cache(maxsize=4)
def _assignments(text: str) -> tuple[tuple[str, str | None], ...]:
    return tuple(_collect(text).items())


def assignments(text: str) -> dict[str, str | None]:
    """Names the paste defines, with their raw values; a name defined twice with different
    values maps to None (which one applies depends on where it is used)."""
    return dict(_assignments(text))


def _collect(text: str) -> dict[str, str | None]:
    """Names the paste defines, with their raw values; a name defined twice with different
    values maps to None (which one applies depends on where it is used)."""
    found: dict[str, str | None] = {}

    def add(name: str, raw: str) -> None:
        value = _unquote(_without_comment(raw).strip().rstrip("\\").strip())
        if name in found and found[name] != value:
            found[name] = None
        else:
            found.setdefault(name, value)

    for m in _SHELL.finditer(text):
        add(m.group(1), m.group(2))
    for m in _PYTHON.finditer(text):
        if not m.group(2).rstrip().endswith(","):  # a keyword argument inside a call, not a constant
            add(m.group(1), m.group(2))
    return found


class _Unresolved(Exception):
    pass


def _lookup(name: str, names: dict[str, str | None], depth: int) -> Fraction:
    raw = names.get(name)
    if raw is None or depth >= _MAX_DEPTH:
        raise _Unresolved(name)
    value = resolve(raw, names, depth + 1)
    if value is None:
        raise _Unresolved(name)
    try:
        return Fraction(value)
    except ValueError:
        raise _Unresolved(name) from None


def _arithmetic(expr: str, names: dict[str, str | None], depth: int, integer_division: bool) -> Fraction:
    tokens, pos = [], 0
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m:
            if expr[pos:].strip():
                raise _Unresolved(expr)
            break
        tokens.append(m.group(1))
        pos = m.end()
        if len(tokens) > _MAX_TOKENS:
            raise _Unresolved(expr)
    at = 0

    def peek() -> str | None:
        return tokens[at] if at < len(tokens) else None

    def take() -> str:
        nonlocal at
        at += 1
        return tokens[at - 1]

    def atom(level: int) -> Fraction:
        if level > _MAX_DEPTH:
            raise _Unresolved(expr)
        tok = peek()
        if tok is None:
            raise _Unresolved(expr)
        take()
        if tok == "(":
            value = sum_(level + 1)
            if peek() != ")":
                raise _Unresolved(expr)
            take()
            return value
        if tok == "-":
            return -atom(level + 1)
        if tok[0].isdigit():
            return Fraction(tok)
        if tok.startswith("$"):
            return _lookup(tok.strip("${}"), names, depth)
        if tok[0].isalpha() or tok[0] == "_":
            return _lookup(tok, names, depth)
        raise _Unresolved(expr)

    def product(level: int) -> Fraction:
        value = atom(level)
        while peek() in ("*", "/", "//", "%"):
            op, right = take(), atom(level)
            if right == 0:
                raise _Unresolved(expr)
            if op == "*":
                value *= right
            elif op == "%":
                value %= right
            elif op == "//" or integer_division:
                value = Fraction(value // right)
            else:
                value /= right
        return value

    def sum_(level: int) -> Fraction:
        value = product(level)
        while peek() in ("+", "-"):
            value = value + product(level) if take() == "+" else value - product(level)
        return value

    result = sum_(0)
    if at != len(tokens):
        raise _Unresolved(expr)
    return result


def _number(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else str(float(value))


_SHELL_MATH = re.compile(r"^\$\(\((.{1,200})\)\)$")
_SHELL_EXPR = re.compile(r"^\$\(expr[ \t]{1,4}(.{1,200})\)$")
_REFERENCE = re.compile(r"^\$\{?([A-Za-z_]\w{0,60})\}?$")
_NAME = re.compile(r"^[A-Za-z_]\w{0,60}$")
_EXPRESSION = re.compile(r"^[\w\s$.{}()+\-*/%]{1,200}$")


def resolve(raw: str, names: dict[str, str | None], depth: int = 0) -> str | None:
    """The literal a value stands for: itself when it is one, the defined value or the result
    of the arithmetic when it refers to names, None when it refers to anything undefined."""
    raw = _unquote(raw.strip())
    try:
        m = _SHELL_MATH.match(raw)
        if m:
            return _number(_arithmetic(m.group(1), names, depth, integer_division=True))
        m = _SHELL_EXPR.match(raw)
        if m:
            return _number(_arithmetic(m.group(1).replace("\\*", "*"), names, depth, integer_division=True))
        m = _REFERENCE.match(raw)
        if m and raw.startswith("$"):
            if depth >= _MAX_DEPTH or names.get(m.group(1)) is None:
                return None
            return resolve(names[m.group(1)], names, depth + 1)
        if "$" in raw:
            return None  # a command substitution or a string built from variables
        if _NAME.match(raw):
            if raw in names and names[raw] is not None and depth < _MAX_DEPTH:
                return resolve(names[raw], names, depth + 1)
            return raw
        if _EXPRESSION.match(raw) and re.search(r"[A-Za-z_]", raw) and re.search(r"[-+*/%]", raw):
            return _number(_arithmetic(raw, names, depth, integer_division=False))
    except _Unresolved:
        return None
    return raw


def is_reference(raw: str) -> bool:
    """Whether a value names something rather than states it: `$X`, `${x}`, `$(...)`,
    `args.batch_size`, `BATCH_SIZE // MICRO`, `torch.cuda.is_available()`."""
    raw = _unquote(raw.strip())
    if "$" in raw:
        return True
    if re.fullmatch(r"[A-Za-z_]\w{0,60}(?:\.\w{1,60}){1,6}(?:\(\))?", raw):
        return not re.fullmatch(r"[\w-]{1,200}\.(?:json|ya?ml|py|sh|txt|bin)", raw)
    return bool(re.search(r"[A-Za-z_]", raw) and re.search(r"\s(?://|[-+*/%])\s", raw))
