"""The package's layers, read from its imports: data flows one way, and channels are siblings.

text → extractors → facts → engine → conclusions → renderers → channels. A module may import
from its own layer or below, never above; a channel never imports another channel, and no
module reaches into another package's private names.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "oomdoctor"

# Lower layers first. A module's layer is the first entry (dotted, after "oomdoctor.") it is or is under;
# an entry ending in "=" names that module alone, not the ones under it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("reading YAML", ("yaml_safe",)),
    ("engine (knows no domain)", ("engine",)),
    ("foundation", ("=", "config", "schema", "templating", "language", "redaction", "knowledge")),
    ("facts and the estimator", ("catalog", "extractors", "observation", "estimate")),
    ("conclusions", ("conclusions",)),
    ("renderers", ("render",)),
    ("a turn", ("answers", "consultation", "conversation", "named_inputs")),
    ("store", ("storage", "store")),
    ("service", ("service",)),
    ("web layer", ("web.",)),
    ("channels", ("channels",)),
    ("the application, assembled", ("web=", "__main__")),
]


def _layer(module: str) -> int:
    name = module.removeprefix("oomdoctor").removeprefix(".")
    for rank, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            if entry.endswith("="):
                if name == entry[:-1]:
                    return rank
            elif entry.endswith("."):
                if name.startswith(entry):
                    return rank
            elif name == entry or name.startswith(entry + "."):
                return rank
    raise AssertionError(f"{module} belongs to no layer: add it to LAYERS in {__file__}")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(dotted: str) -> bool:
    path = PACKAGE.parent.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(absolute module, imported names, line) for every import in the file, relative ones resolved."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.extend((alias.name, [], node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = parts[: len(parts) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names = [alias.name for alias in node.names]
            # `from package import submodule` imports that submodule, not the package's own code.
            submodules = [n for n in names if _is_module(f"{base}.{n}")]
            out.extend((f"{base}.{n}", [], node.lineno) for n in submodules)
            if len(submodules) < len(names):
                out.append((base, [n for n in names if n not in submodules], node.lineno))
    return [(m, n, line) for m, n, line in out if m == "oomdoctor" or m.startswith("oomdoctor.")]


MODULES = sorted(p for p in PACKAGE.rglob("*.py"))


def _channel(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "channels" else None


def _package(module: str) -> tuple[str, ...]:
    """The unit whose private names a module may use: its top-level package, or its own channel."""
    parts = tuple(module.split("."))
    return parts[:3] if _channel(module) else parts[:2]


def _problems(module: str, imports: list[tuple[str, list[str], int]]) -> list[str]:
    mine = _layer(module)
    problems = []
    for target, names, line in imports:
        if target == "oomdoctor":
            continue
        if _layer(target) > mine:
            problems.append(f"line {line}: {module} ({LAYERS[mine][0]}) imports {target} ({LAYERS[_layer(target)][0]})")
        here, there = _channel(module), _channel(target)
        if there and here and here != there:
            problems.append(f"line {line}: channel {here} imports channel {there}")
        own_package = _package(module) == _package(target)
        private = [n for n in names if n.startswith("_") and n != "__future__"]
        if private and not own_package:
            problems.append(f"line {line}: {module} takes private {private} from {target}")
    return problems


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down_and_channels_stay_apart(path: Path):
    problems = _problems(_module_name(path), _imports(path))
    assert not problems, "\n".join(problems)


def test_the_checker_catches_each_kind_of_break():
    """What the rule refuses, shown on imports that were in the code before the channels were separated."""
    assert _problems("oomdoctor.channels.slack.commands", [("oomdoctor.channels.rest.api", ["_step"], 3)]) == [
        "line 3: channel slack imports channel rest",
        "line 3: oomdoctor.channels.slack.commands takes private ['_step'] from oomdoctor.channels.rest.api"]
    assert _problems("oomdoctor.conclusions.report", [("oomdoctor.consultation", ["State"], 5)]) == [
        "line 5: oomdoctor.conclusions.report (conclusions) imports oomdoctor.consultation (a turn)"]
    assert _problems("oomdoctor.web.security", [("oomdoctor.web.errors", ["BadInput"], 1)]) == []
    assert _layer("oomdoctor.web.security") < _layer("oomdoctor.channels.rest.api") < _layer("oomdoctor.web")


def test_relative_imports_resolve_to_modules():
    page = PACKAGE / "channels" / "page" / "views.py"
    targets = {target for target, _, _ in _imports(page)}
    assert {"oomdoctor.web.input", "oomdoctor.web.context", "oomdoctor.channels.page"} <= targets
