"""Every remedy's change runs when a user pastes it.

Python compiles, and every keyword in a call to a library class or function exists on the
installed class (transformers, TRL, peft; bitsandbytes' config lives in transformers);
every `training_args`, `trainer_args`, `peft` and `bitsandbytes` key is a field of its class and
the class accepts the values; every DeepSpeed key path is in DeepSpeed's config schema (read
from its source by scripts/deepspeed_config_keys.py, since DeepSpeed does not install here);
shell lines parse; environment names are valid; and each kind renders as one block in one
language.
"""
from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import json
import logging
import re
import shlex
import shutil
import subprocess
import warnings
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from conftest import require
from oomdoctor import knowledge
from oomdoctor.render.text import LANGUAGE, change_blocks, change_text
from oomdoctor.templating import fill_value

KB = knowledge.default()
REMEDIES = sorted(KB.remedies)
DEEPSPEED = json.loads((Path(__file__).parent / "data" / "deepspeed_config_keys.json").read_text(encoding="utf-8"))

# Where a name a snippet uses without importing it is looked for, in this order.
LIBRARIES = ("transformers", "trl", "peft", "torch", "accelerate", "datasets")
# Snippets name the objects a training script has by their usual names.
CONVENTIONAL = {"model": "transformers.PreTrainedModel", "tokenizer": "transformers.PreTrainedTokenizerBase",
                "ds": "datasets.Dataset", "dataset": "datasets.Dataset", "trainer": "transformers.Trainer"}
# A class a snippet may name from these libraries looks like one; a miss is an error, not a local name.
LIBRARY_CLASS = re.compile(r"[A-Z]\w*(?:Config|Arguments|Trainer|ForCausalLM|Model)")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Libraries a remedy's code uses that are not installed here (GPU- or platform-only); calls into them
# are compiled but not checked. Any other missing module is an error: a misspelt import looks the same.
NOT_INSTALLED_HERE = {"liger_kernel", "cut_cross_entropy", "ipex_llm", "tensorflow"}


def sample(name: str) -> Any:
    """A placeholder's value in a typical set-up: the checks need values of the right type."""
    return 2 if KB.facts[name].type in ("integer", "number") else None


def change(remedy_id: str, lookup=sample) -> dict[str, Any]:
    """The change as a reply carries it: placeholders filled (`lookup` gives the set-up's values), a note in English."""
    return {k: fill_value(v, lookup) if k != "note" else v["en"] for k, v in KB.remedies[remedy_id].change.items()}


def with_kind(kind: str) -> list[str]:
    return [r for r in REMEDIES if kind in KB.remedies[r].change]


# --- Python ---------------------------------------------------------------------------------

def parse(code: str, where: str) -> ast.Module:
    """The snippet as Python; `...` stands for the user's own arguments and is valid Python already."""
    try:
        compile(code, where, "exec")
    except SyntaxError as exc:
        pytest.fail(f"{where}: does not compile: {exc.msg} (line {exc.lineno}: {exc.text!r})", pytrace=False)
    tree = ast.parse(code)
    # `r: 16` or `target_modules: all-linear` compile as annotations: that is YAML pasted into Python.
    yaml_lines = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.AnnAssign)]
    if yaml_lines:
        pytest.fail(f"{where}: `key: value` lines {yaml_lines} are YAML, not Python", pytrace=False)
    return tree


@pytest.mark.parametrize("remedy_id", REMEDIES)
def test_python_blocks_compile(remedy_id):
    for kind, language, text in change_blocks(change(remedy_id)):
        if language == "python":
            parse(text, f"{remedy_id}: {kind}")


def dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


class Unchecked(Exception):
    """The library is not installed here (ipex-llm, liger-kernel, TensorFlow...)."""


def import_object(path: str) -> Any:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and not module_name.startswith(exc.name) and not exc.name.startswith(module_name):
                raise
            if cut == 1:
                raise Unchecked(parts[0]) from None
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)  # AttributeError: the name does not exist in the installed library
        return obj
    raise Unchecked(path)


def names_bound(tree: ast.Module) -> set[str]:
    """Names the snippet itself defines (assignments, functions, loop variables, lambdas' arguments).

    `dataset = dataset.map(...)` keeps the conventional meaning of the name; any other binding replaces it.
    """
    rebound_from_itself = {id(node.targets[0]) for node in ast.walk(tree)
                           if isinstance(node, ast.Assign) and len(node.targets) == 1
                           and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call)
                           and isinstance(node.value.func, ast.Attribute)
                           and isinstance(node.value.func.value, ast.Name)
                           and node.value.func.value.id == node.targets[0].id}
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and id(node) not in rebound_from_itself:
            out.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.add(node.name)
            out.update(a.arg for a in node.args.args)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
    return out


def imports_of(tree: ast.Module) -> dict[str, str]:
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                out[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                out[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return out


def resolve(name: str, imports: dict[str, str], local: set[str]) -> Any:
    """The installed object a dotted name in a snippet means; None for the snippet's own names and builtins."""
    head, _, rest = name.partition(".")
    if head in imports:
        base = imports[head]
    elif head in local or head in dir(__builtins__) or head.isupper():
        return None  # the snippet's own variable, a builtin, or a placeholder such as MODEL
    elif head in CONVENTIONAL:
        # Calling the object itself (tokenizer(...)) calls its class's __call__.
        base = CONVENTIONAL[head] if rest else f"{CONVENTIONAL[head]}.__call__"
    else:
        for library in LIBRARIES:
            found = getattr(import_object(library), head, None)
            if inspect.isclass(found) or inspect.isfunction(found):  # not a submodule named like a variable
                base = f"{library}.{head}"
                break
        else:
            if LIBRARY_CLASS.fullmatch(head):
                raise AttributeError(f"{head} is in none of {', '.join(LIBRARIES)}")
            return None
    return import_object(f"{base}.{rest}" if rest else base)


@cache
def from_pretrained_keywords() -> tuple[frozenset[str], frozenset[str]]:
    """The keywords PreTrainedModel.from_pretrained documents or reads, and those it calls deprecated."""
    from transformers import PreTrainedModel, modeling_utils

    method = PreTrainedModel.from_pretrained
    documented = set(re.findall(r"^\s*(\w+) \(`", inspect.getdoc(method) or "", re.M))
    read = set(re.findall(r'kwargs\.pop\(\s*"(\w+)"', inspect.getsource(method)))
    named = {p.name for p in inspect.signature(method).parameters.values() if p.kind is p.KEYWORD_ONLY
             or p.kind is p.POSITIONAL_OR_KEYWORD}
    module_source = inspect.getsource(modeling_utils)
    deprecated = {n for n in read if re.search(rf"`{n}` is deprecated", module_source)}
    return frozenset((documented | read | named) - {n for n in read if n.startswith("_")}), frozenset(deprecated)


def accepted_keywords(obj: Any, name: str) -> tuple[set[str] | None, set[str]]:
    """(keywords a call may pass, those deprecated); None when the callable takes any keyword."""
    if name.endswith(".from_pretrained") and getattr(obj, "__module__", "").startswith("transformers"):
        documented, deprecated = from_pretrained_keywords()
        return set(documented), set(deprecated)
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return None, set()
    params = signature.parameters.values()
    named = {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    open_ended = any(p.kind is p.VAR_KEYWORD for p in params)
    # Configuration classes take **kwargs only to warn about (or pass on) what they do not know.
    if open_ended and not (inspect.isclass(obj) and obj.__name__.endswith("Config")):
        return None, set()
    return named, set()


def keyword_errors(code: str, where: str) -> tuple[list[str], list[str]]:
    tree = parse(code, where)
    imports, local = imports_of(tree), names_bound(tree)
    errors, unchecked = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                try:
                    import_object(f"{node.module}.{alias.name}")
                except Unchecked as exc:
                    unchecked.append(str(exc))
                except (AttributeError, ImportError) as exc:
                    errors.append(f"from {node.module} import {alias.name}: {exc}")
        if not isinstance(node, ast.Call):
            continue
        name = dotted(node.func)
        if not name:
            continue
        try:
            obj = resolve(name, imports, local - set(imports))
        except Unchecked as exc:
            unchecked.append(str(exc))
            continue
        except AttributeError as exc:
            errors.append(f"{name}: {exc}")
            continue
        if obj is None or not callable(obj):
            continue
        accepted, deprecated = accepted_keywords(obj, name)
        for kw in node.keywords:
            if kw.arg is None:
                continue
            if accepted is not None and kw.arg not in accepted:
                errors.append(f"{name}(..., {kw.arg}=...): {kw.arg} is not a parameter of {name}")
            elif kw.arg in deprecated:
                errors.append(f"{name}(..., {kw.arg}=...): {kw.arg} is deprecated in the installed library")
    return errors, unchecked


@pytest.mark.parametrize("remedy_id", with_kind("code"))
def test_code_keywords_exist_on_the_installed_classes(remedy_id):
    require("transformers")
    require("peft")
    require("trl")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        errors, unchecked = keyword_errors(change(remedy_id)["code"], f"{remedy_id}: code")
    assert not errors, "\n".join(errors)
    assert set(unchecked) <= NOT_INSTALLED_HERE, f"modules not found: {sorted(set(unchecked) - NOT_INSTALLED_HERE)}"


# --- argument mappings ------------------------------------------------------------------------

def fields_of(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls) if f.init}


# Deprecated names kept on purpose: their replacement is too new for most set-ups to have it.
KEPT_DEPRECATED = {
    # activation_checkpointing(_kwargs) exists only from transformers 5.23; the old names work everywhere.
    "gradient_checkpointing": "transformers 5.23", "gradient_checkpointing_kwargs": "transformers 5.23",
}

# Arguments whose effect at construction needs what the CPU test machine lacks: the DeepSpeed
# config file and package. Their names are still checked; their values are not.
NEEDS_MORE_THAN_CPU = ("deepspeed",)


class Deprecations(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "deprecated" in record.getMessage():
            self.messages.append(record.getMessage())


def instantiate(cls: type, args: dict[str, Any], tmp_path: Path, skip: tuple[str, ...] = ()) -> None:
    """Build the class with the values: an unknown choice, a wrong type or a deprecated form fails
    here, as it would fail (or warn) for the user."""
    values = {k: v for k, v in args.items() if k not in skip}
    if dataclasses.is_dataclass(cls) and "output_dir" in fields_of(cls):
        values.setdefault("output_dir", str(tmp_path))
        values.setdefault("use_cpu", True)  # TRL's configs default to bf16, which asks for a GPU
    handler = Deprecations()
    loggers = [logging.getLogger(name) for name in ("transformers", "trl", "peft")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cls(**values)
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
    # Only what the change itself passes: TRL's configs set some deprecated defaults of their own.
    said = [m for m in handler.messages + [str(w.message) for w in caught if "deprecated" in str(w.message)]
            if any(f"`{name}`" in m for name in args if name not in KEPT_DEPRECATED)]
    assert not said, f"{cls.__name__}: " + "; ".join(said)


@pytest.mark.parametrize("remedy_id", with_kind("training_args"))
def test_training_args_are_training_arguments_fields(remedy_id, tmp_path):
    transformers = require("transformers")
    args = change(remedy_id)["training_args"]
    unknown = sorted(set(args) - fields_of(transformers.TrainingArguments))
    assert not unknown, (f"not TrainingArguments fields: {unknown} "
                         "(a key of a subclass, SFTConfig or Seq2SeqTrainingArguments, belongs under trainer_args)")
    instantiate(transformers.TrainingArguments, args, tmp_path, skip=NEEDS_MORE_THAN_CPU)


def trainer_args_class(name: str) -> type:
    """A class the Trainer family takes as `args`: TrainingArguments' subclasses in transformers and TRL."""
    transformers, trl = require("transformers"), require("trl")
    for library in (transformers, trl):
        cls = getattr(library, name, None)
        if inspect.isclass(cls) and issubclass(cls, transformers.TrainingArguments):
            return cls
    raise LookupError(f"{name} is not a TrainingArguments class of transformers {transformers.__version__} "
                      f"or TRL {trl.__version__}")


@pytest.mark.parametrize("remedy_id", with_kind("trainer_args"))
def test_trainer_args_keys_are_fields_of_the_named_class(remedy_id, tmp_path):
    for name, args in change(remedy_id)["trainer_args"].items():
        cls = trainer_args_class(name)
        unknown = sorted(set(args) - fields_of(cls))
        assert not unknown, f"not {name} fields: {unknown}"
        instantiate(cls, args, tmp_path, skip=NEEDS_MORE_THAN_CPU)


@pytest.mark.parametrize("remedy_id", with_kind("peft"))
def test_peft_keys_are_lora_config_fields(remedy_id, tmp_path):
    peft = require("peft")
    args = change(remedy_id)["peft"]
    unknown = sorted(set(args) - fields_of(peft.LoraConfig))
    assert not unknown, f"not LoraConfig fields: {unknown}"
    instantiate(peft.LoraConfig, args, tmp_path)


@pytest.mark.parametrize("remedy_id", with_kind("bitsandbytes"))
def test_bitsandbytes_keys_are_bitsandbytes_config_parameters(remedy_id, tmp_path):
    transformers = require("transformers")
    args = change(remedy_id)["bitsandbytes"]
    accepted, _ = accepted_keywords(transformers.BitsAndBytesConfig, "BitsAndBytesConfig")
    unknown = sorted(set(args) - accepted)
    assert not unknown, f"not BitsAndBytesConfig parameters: {unknown}"
    instantiate(transformers.BitsAndBytesConfig, args, tmp_path)


# --- DeepSpeed --------------------------------------------------------------------------------

def deepspeed_errors(config: dict[str, Any]) -> list[str]:
    paths, modelled = DEEPSPEED["paths"], set(DEEPSPEED["modelled_sections"])
    errors = []

    def walk(prefix: str, body: dict[str, Any]) -> None:
        for key, value in body.items():
            path = f"{prefix}.{key}"
            entry = paths.get(path)
            if key in DEEPSPEED["removed"].get(prefix, ()):
                errors.append(f"{path}: removed from DeepSpeed")
            elif entry is None:
                errors.append(f"{path}: not a DeepSpeed config key")
            elif "deprecated" in entry:
                errors.append(f"{path}: deprecated, use {entry['deprecated']}")
            elif isinstance(value, dict):
                if entry.get("section"):
                    walk(path, value)
                else:
                    errors.append(f"{path}: takes a value, not a mapping")
            elif "values" in entry and value not in entry["values"] and value != "auto":
                errors.append(f"{path}: {value!r} is not one of {entry['values']}")

    for key, value in config.items():
        if key in DEEPSPEED["removed"].get("", ()):
            errors.append(f"{key}: removed from DeepSpeed")
        elif key not in DEEPSPEED["top_level"]:
            errors.append(f"{key}: not a top-level DeepSpeed config key")
        elif key in modelled and isinstance(value, dict):
            walk(key, value)
    return errors


def test_the_deepspeed_key_list_names_its_source():
    assert DEEPSPEED["deepspeed_version"] and DEEPSPEED["read_from"]
    # A wrong key is caught at each depth, and a deprecated one too.
    assert deepspeed_errors({"zero_optimisation": {}})
    assert deepspeed_errors({"zero_optimization": {"stage3_max_live_params": 1}})
    assert deepspeed_errors({"zero_optimization": {"offload_param": {"device": "gpu"}}})
    assert deepspeed_errors({"zero_optimization": {"cpu_offload": True}})
    assert not deepspeed_errors({"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}})


@pytest.mark.parametrize("remedy_id", with_kind("deepspeed"))
def test_deepspeed_keys_exist_in_deepspeeds_config(remedy_id):
    errors = deepspeed_errors(change(remedy_id)["deepspeed"])
    assert not errors, f"DeepSpeed {DEEPSPEED['deepspeed_version']}: " + "; ".join(errors)


# --- shell and environment ----------------------------------------------------------------------

def commands(text: str) -> list[str]:
    """The lines that are not comments, with backslash continuations joined."""
    joined = re.sub(r"\\\n", " ", text)
    return [line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


@pytest.mark.parametrize("remedy_id", with_kind("shell") + with_kind("launch"))
def test_shell_and_launch_lines_parse(remedy_id):
    for kind in ("shell", "launch"):
        text = change(remedy_id).get(kind)
        if text is None:
            continue
        lines = commands(text)
        assert lines, f"{kind} holds only comments: that is a note"
        for line in lines:
            try:
                words = shlex.split(line, comments=True)
            except ValueError as exc:
                pytest.fail(f"{kind}: {line!r}: {exc}", pytrace=False)
            assert not (words and words[0].endswith(":")), f"{kind}: {line!r} is YAML, not a command"
            # `<your config>` pastes as a redirection from a file named "your".
            assert not re.search(r"<[A-Za-z][^<>]*>", line), f"{kind}: {line!r}: an <angle-bracket> placeholder"
            if words[:2] == ["accelerate", "launch"]:
                errors = accelerate_launch_errors(words[2:])
                assert not errors, f"{kind}: {line!r}: {errors}"


def accelerate_launch_errors(argv: list[str]) -> str | None:
    """What the installed accelerate's own parser says about a launch command line."""
    require("accelerate")
    from accelerate.commands.launch import launch_command_parser

    parser = launch_command_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit:
        return "accelerate launch rejects these arguments"
    # accelerate reads the --parallelism_config_* flags only with --use_parallelism_config
    # (or from a config file), so without it they are silently ignored.
    given = [a for a in argv if a.startswith(("--parallelism_config_", "--parallelism-config-"))]
    if given and not args.use_parallelism_config:
        return f"{given} are ignored without --use_parallelism_config"
    return None


@pytest.mark.parametrize("remedy_id", with_kind("env"))
def test_environment_names_are_valid(remedy_id):
    for name, value in change(remedy_id)["env"].items():
        assert ENV_NAME.fullmatch(name), f"not an environment variable name: {name!r}"
        assert isinstance(value, str), f"{name}: give the value as a string, as the shell sees it: {value!r}"


# --- one block, one language ---------------------------------------------------------------------

def bash_parses(text: str) -> str | None:
    result = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True, timeout=10)
    return result.stderr.strip() if result.returncode else None


def unknown(name: str) -> None:
    return None


@pytest.mark.parametrize("facts_known", [True, False], ids=["facts known", "facts unknown"])
@pytest.mark.parametrize("remedy_id", REMEDIES)
def test_each_kind_renders_as_one_block_in_one_language(remedy_id, facts_known):
    current = change(remedy_id, sample if facts_known else unknown)
    blocks = change_blocks(current)
    assert [kind for kind, _, _ in blocks] == list(current)
    for kind, language, text in blocks:
        assert language == LANGUAGE[kind] and text.strip(), kind
        assert "\n\n" not in text, f"{kind}: a blank line inside one block splits it in two"
        if language == "python":
            tree = parse(text, f"{remedy_id}: {kind}")
            if kind != "code":
                numbers_as_text = [kw.arg for node in ast.walk(tree) if isinstance(node, ast.Call)
                                   for kw in node.keywords if isinstance(kw.value, ast.Constant)
                                   and isinstance(kw.value.value, str) and re.fullmatch(r"[\d.]+", kw.value.value)]
                assert not numbers_as_text, f"{kind}: numbers rendered as text: {numbers_as_text}"
        elif language == "json":
            json.loads(text)
        elif language == "shell" and shutil.which("bash"):
            error = bash_parses(text)
            assert error is None, f"{kind}: bash -n: {error}"
        elif language == "text":
            assert all(line.startswith("# ") for line in text.splitlines())
    assert change_text(current) == "\n\n".join(text for _, _, text in blocks)


def test_a_block_that_mixes_languages_is_caught():
    # What the issue found: a YAML mapping above Python in one block.
    with pytest.raises(pytest.fail.Exception):
        parse("r: 16\nlora_alpha: 32\nmodel = get_peft_model(model, config)\n", "mixed")
    with pytest.raises(pytest.fail.Exception):
        parse("trainer = Trainer(model_init=init, args=args, ...)\n", "placeholder after keywords")


@pytest.mark.parametrize("code, wrong", [
    ("TrainingArguments(..., max_seq_length=2048)", "max_seq_length"),            # SFTConfig's, not the Trainer's
    ("from trl import PPOTrainer", "PPOTrainer"),                                 # gone from TRL 1.13
    ("model = AutoModelForCausalLM.from_pretrained(MODEL, low_cpu_mem_usage=True)", "low_cpu_mem_usage"),
    ("from peft import LoraConfig\nLoraConfig(rank=16)", "rank"),
    ("dataset.map(tokenize, batch=True)", "batch"),
])
def test_a_keyword_the_installed_library_lacks_is_caught(code, wrong):
    require("transformers")
    require("trl")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        errors, _ = keyword_errors(code, "probe")
    assert any(wrong in e for e in errors), errors


def test_a_relative_change_shows_the_number_its_estimate_assumes():
    """vllm_lower_share halves the share in its what-if; the change shown must be that half, not the
    share the user runs now, and a stated fallback while the share is unknown."""
    remedy = KB.remedies["vllm_lower_share"]
    factor = remedy.whatif["multiply"]["rl.vllm_memory_share"]
    known = change("vllm_lower_share", {"rl.vllm_memory_share": 0.9}.get)
    assert known["trainer_args"]["GRPOConfig"]["vllm_gpu_memory_utilization"] == pytest.approx(0.9 * factor)
    unknown = change("vllm_lower_share", lambda name: None)
    assert float(unknown["trainer_args"]["GRPOConfig"]["vllm_gpu_memory_utilization"]) == 0.3
