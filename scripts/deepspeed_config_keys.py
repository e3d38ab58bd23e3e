"""List the key paths a DeepSpeed config may hold, read from DeepSpeed's source without importing it.

DeepSpeed builds against torch and does not install in CI, so the remedies' DeepSpeed
blocks are checked against a data file this script writes:

    pip download deepspeed==0.19.8 --no-deps --no-binary :all: -d /tmp/ds
    python scripts/deepspeed_config_keys.py /tmp/ds/deepspeed-0.19.8.tar.gz \
        -o tests/data/deepspeed_config_keys.json

SOURCE is the sdist (.tar.gz) or an unpacked source tree. What is read:
- sections backed by pydantic models (`zero_optimization` with its `offload_param` and
  `offload_optimizer`, `bf16`, `fp16`, ...): every field, its JSON alias, and the members
  of an enum-typed field; fields marked deprecated are listed apart, with their successor;
- the top level: every key that `deepspeed/runtime/config.py`, and the modules it imports,
  read from the config dict (`param_dict.get(K)`, `param_dict[K]`, `K in param_dict`,
  `get_scalar_param(param_dict, K, ...)`), constants resolved through the modules that
  define them. Sections without a model (optimizer, scheduler, ...) have children that
  are not checked;
- keys DeepSpeed rejects as removed (`_REMOVED_*_CONFIG_KEYS` in config.py).
Only names and the version are written; none of DeepSpeed's code is copied.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import sys
import tarfile
from pathlib import Path, PurePosixPath

# Top-level sections whose value is validated by a pydantic model, and that model's class.
MODELLED_SECTIONS = {
    "zero_optimization": "DeepSpeedZeroConfig",
    "bf16": "DeepSpeedBF16Config",
    "bfloat16": "DeepSpeedBF16Config",
    "fp16": "DeepSpeedFP16Config",
}
CONFIG_MODULE = "deepspeed/runtime/config.py"
MODEL_BASE = "DeepSpeedConfigModel"


class Source:
    """DeepSpeed's Python files, from an sdist or a directory, keyed by their path from the package root."""

    def __init__(self, path: Path):
        self.files: dict[str, str] = {}
        if path.is_dir():
            for file in path.rglob("*"):
                if file.suffix in (".py", ".txt") and file.is_file():
                    self.files[file.relative_to(path).as_posix()] = file.read_text(encoding="utf-8")
            self.origin = f"source tree {path.name}"
        else:
            with tarfile.open(path) as tar:
                for member in tar.getmembers():
                    name = PurePosixPath(member.name)
                    if member.isfile() and name.suffix in (".py", ".txt") and len(name.parts) > 1:
                        data = tar.extractfile(member).read()
                        self.files[PurePosixPath(*name.parts[1:]).as_posix()] = data.decode("utf-8")
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            self.origin = f"{path.name} (sha256 {digest})"
        self._trees: dict[str, ast.Module] = {}

    def tree(self, module_path: str) -> ast.Module:
        if module_path not in self._trees:
            self._trees[module_path] = ast.parse(self.files[module_path], module_path)
        return self._trees[module_path]

    def version(self) -> str:
        return self.files.get("version.txt", "unknown").strip()

    def git_hash(self) -> str:
        info = self.files.get("deepspeed/git_version_info_installed.py", "")
        for node in ast.parse(info).body if info else []:
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "git_hash":
                return ast.literal_eval(node.value)
        return "unknown"


def resolve_import(source: Source, module_path: str, node: ast.ImportFrom) -> str | None:
    """The file an import names, relative or absolute, when it is part of DeepSpeed."""
    if node.level:
        base = PurePosixPath(module_path).parent
        for _ in range(node.level - 1):
            base = base.parent
        parts = list(base.parts) + (node.module.split(".") if node.module else [])
    elif node.module and node.module.split(".")[0] == "deepspeed":
        parts = node.module.split(".")
    else:
        return None
    for candidate in ("/".join(parts) + ".py", "/".join(parts) + "/__init__.py"):
        if candidate in source.files:
            return candidate
    return None


def string_constants(source: Source, module_path: str, seen: set[str] | None = None) -> dict[str, str]:
    """Module-level NAME = "text" in a file and in what it imports with `*` or by name."""
    seen = seen if seen is not None else set()
    if module_path in seen:
        return {}
    seen.add(module_path)
    out: dict[str, str] = {}
    for node in source.tree(module_path).body:
        if isinstance(node, ast.ImportFrom):
            target = resolve_import(source, module_path, node)
            if target is None:
                continue
            found = string_constants(source, target, seen)
            names = {a.name for a in node.names}
            out.update(found if "*" in names else {k: v for k, v in found.items() if k in names})
        elif (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
              and isinstance(node.value.value, str)):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value.value
    return out


def _key(node: ast.AST, constants: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def _is_config_dict(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "param_dict"


def keys_read(source: Source, module_path: str) -> set[str]:
    """Keys a module reads from a dict named param_dict (DeepSpeed's name for the whole config)."""
    constants = string_constants(source, module_path)
    keys: set[str] = set()
    for node in ast.walk(source.tree(module_path)):
        found = None
        if isinstance(node, ast.Call):
            func = node.func
            if (isinstance(func, ast.Attribute) and func.attr in ("get", "pop") and _is_config_dict(func.value)
                    and node.args):
                found = node.args[0]
            elif (isinstance(func, ast.Name) and func.id.startswith("get_") and func.id.endswith("_param")
                  and len(node.args) >= 2 and _is_config_dict(node.args[0])):
                found = node.args[1]
        elif isinstance(node, ast.Subscript) and _is_config_dict(node.value):
            found = node.slice
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            right = node.comparators[0]
            if _is_config_dict(right) or (isinstance(right, ast.Call) and isinstance(right.func, ast.Attribute)
                                          and right.func.attr == "keys" and _is_config_dict(right.func.value)):
                found = node.left
        key = _key(found, constants) if found is not None else None
        if key:
            keys.add(key)
    return keys


def top_level_keys(source: Source) -> set[str]:
    keys = keys_read(source, CONFIG_MODULE)
    for node in source.tree(CONFIG_MODULE).body:
        if isinstance(node, ast.ImportFrom):
            target = resolve_import(source, CONFIG_MODULE, node)
            if target and "*" not in {a.name for a in node.names}:
                keys |= keys_read(source, target)
    return keys | set(MODELLED_SECTIONS)


def removed_keys(source: Source) -> dict[str, list[str]]:
    """Keys config.py refuses with an error naming them as removed: {"": top level, "zero_optimization": ...}."""
    out: dict[str, list[str]] = {}
    for node in source.tree(CONFIG_MODULE).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        name = getattr(target, "id", "")
        if name.startswith("_REMOVED_") and isinstance(node.value, ast.Dict):
            section = "" if "TOP_LEVEL" in name else "zero_optimization" if "ZERO" in name else None
            if section is None:
                continue
            out[section] = sorted(k.value for k in node.value.keys if isinstance(k, ast.Constant))
    return out


class Models:
    """Every class in the package by name, to follow a model's field types and bases."""

    def __init__(self, source: Source):
        self.classes: dict[str, tuple[str, ast.ClassDef]] = {}
        for path in sorted(source.files):
            if not (path.startswith("deepspeed/") and path.endswith(".py")):
                continue
            try:
                tree = source.tree(path)
            except SyntaxError:
                continue
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    self.classes.setdefault(node.name, (path, node))

    def is_model(self, name: str) -> bool:
        if name == MODEL_BASE:
            return True
        entry = self.classes.get(name)
        return bool(entry) and any(self.is_model(b.id) for b in entry[1].bases if isinstance(b, ast.Name))

    def enum_values(self, name: str) -> list | None:
        entry = self.classes.get(name)
        if not entry or not any(isinstance(b, ast.Name) and b.id.endswith("Enum") or
                                isinstance(b, ast.Attribute) and b.attr.endswith("Enum") for b in entry[1].bases):
            return None
        values = []
        for node in entry[1].body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                if node.value.value not in values:
                    values.append(node.value.value)
        return values or None

    def fields(self, name: str) -> dict[str, dict]:
        """A model's JSON keys: field names and aliases, each with its nested model or enum values."""
        path, cls = self.classes[name]
        out: dict[str, dict] = {}
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id != MODEL_BASE and self.is_model(base.id):
                out.update(self.fields(base.id))
        for node in cls.body:
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            entry: dict = {}
            referenced = {n.id for n in ast.walk(node.annotation) if isinstance(n, ast.Name)}
            nested = sorted(r for r in referenced if r in self.classes and self.is_model(r))
            if nested:
                entry["model"] = nested[0]
            for ref in sorted(referenced):
                values = self.enum_values(ref)
                if values is not None:
                    entry["values"] = values
            alias, deprecated = None, None
            if isinstance(node.value, ast.Call) and getattr(node.value.func, "id", "") == "Field":
                for kw in node.value.keywords:
                    if kw.arg == "alias" and isinstance(kw.value, ast.Constant):
                        alias = kw.value.value
                    if kw.arg == "json_schema_extra" and isinstance(kw.value, ast.Dict):
                        extra = {k.value: v for k, v in zip(kw.value.keys, kw.value.values)
                                 if isinstance(k, ast.Constant)}
                        if isinstance(extra.get("deprecated"), ast.Constant) and extra["deprecated"].value:
                            new = extra.get("new_param")
                            deprecated = new.value if isinstance(new, ast.Constant) else ""
            if deprecated is not None:
                entry["deprecated"] = deprecated
            out[node.target.id] = entry
            if alias:
                out[alias] = dict(entry, alias_of=node.target.id)
        return out


def walk_model(models: Models, name: str, prefix: str, paths: dict[str, dict], seen: tuple[str, ...] = ()) -> None:
    for key, entry in models.fields(name).items():
        path = f"{prefix}.{key}"
        record = {k: v for k, v in entry.items() if k != "model"}
        if "model" in entry:
            record["section"] = True
        paths[path] = record
        if "model" in entry and entry["model"] not in seen:
            walk_model(models, entry["model"], path, paths, seen + (name,))


def build(source: Source) -> dict:
    models = Models(source)
    removed = removed_keys(source)
    paths: dict[str, dict] = {}
    for section, model in MODELLED_SECTIONS.items():
        if model not in models.classes:
            sys.exit(f"{model} (for '{section}') is not in this DeepSpeed source")
        paths[section] = {"section": True}
        walk_model(models, model, section, paths)
    return {
        "deepspeed_version": source.version(),
        "deepspeed_git_hash": source.git_hash(),
        "read_from": source.origin,
        "generated_by": "scripts/deepspeed_config_keys.py",
        "modelled_sections": sorted(MODELLED_SECTIONS),
        "top_level": sorted(top_level_keys(source) - set(removed.get("", ()))),
        "removed": removed,
        "paths": dict(sorted(paths.items())),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="DeepSpeed's sdist (.tar.gz) or an unpacked source tree")
    parser.add_argument("-o", "--output", type=Path, help="where to write the JSON (default: stdout)")
    args = parser.parse_args(argv)
    data = build(Source(args.source))
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
