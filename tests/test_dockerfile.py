"""The Dockerfile runs what `make serve` runs, as a non-root user, with a working health check.

No Docker engine is needed: the Dockerfile is parsed, held against the Makefile, linted,
and its HEALTHCHECK command is run for real against a live gunicorn.
"""
from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    out, pending = [], ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        line = pending + line
        pending = ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, "a continuation line runs off the end"
    return out


def make_targets(path: Path) -> dict[str, tuple[list[str], list[str]]]:
    """target → (prerequisites, recipe lines), with $(VAR) := values substituted."""
    text = path.read_text(encoding="utf-8")
    variables = dict(re.findall(r"^(\w+)\s*:?=\s*(.*)$", text, re.M))
    variables = {k: v.strip() for k, v in variables.items()}

    def expand(s: str) -> str:
        for _ in range(5):
            s = re.sub(r"\$\((\w+)\)", lambda m: variables.get(m.group(1), m.group(0)), s)
        return s

    targets: dict[str, tuple[list[str], list[str]]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("\t") and current:
            targets[current][1].append(expand(line.strip()))
            continue
        match = re.match(r"^([^\s:=#][^:=]*?):(?!=)(.*)$", line)
        if match:
            current = expand(match.group(1).strip())
            deps = expand(match.group(2).split("|")[0]).split() + expand(match.group(2).partition("|")[2]).split()
            targets[current] = (deps, [])
        elif line.strip() and not line.startswith("#"):
            current = None
    return targets


@pytest.fixture(scope="module")
def docker() -> list[tuple[str, str]]:
    return instructions(ROOT / "Dockerfile")


@pytest.fixture(scope="module")
def make() -> dict[str, tuple[list[str], list[str]]]:
    return make_targets(ROOT / "Makefile")


def args(docker, word: str) -> list[str]:
    return [rest for w, rest in docker if w == word]


def exec_form(rest: str) -> list[str]:
    value = json.loads(rest)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), f"not exec form: {rest}"
    return value


def runtime_requirements(make) -> str:
    """The requirements file `make serve` installs."""
    deps, _ = make["serve"]
    for dep in deps:
        for line in make.get(dep, ([], []))[1]:
            match = re.search(r"pip install .*-r\s+(\S+)", line)
            if match:
                return match.group(1)
    raise AssertionError("make serve installs no requirements file")


def test_base_image_is_pinned_slim_python(docker):
    [base] = args(docker, "FROM")
    assert base == "python:3.11-slim"
    for image in args(docker, "FROM"):
        name = image.split()[0]
        assert ":" in name and not name.endswith(":latest"), f"unpinned base image {name}"


def test_installs_the_requirements_make_serve_installs(docker, make):
    requirements = runtime_requirements(make)
    assert requirements == "requirements.txt"
    copies = args(docker, "COPY")
    runs = args(docker, "RUN")
    pip_runs = [r for r in runs if "pip install" in r]
    assert any(f"-r {requirements}" in r for r in pip_runs)
    # The requirements file is copied alone and installed before the code, so code edits reuse the layer.
    order = [(w, r) for w, r in docker if w in ("COPY", "RUN")]
    first_copy = next(i for i, (w, r) in enumerate(order) if w == "COPY")
    install = next(i for i, (w, r) in enumerate(order) if w == "RUN" and f"-r {requirements}" in r)
    assert order[first_copy][1].split()[0] == requirements and first_copy < install
    code = next(i for i, (w, r) in enumerate(order) if w == "COPY" and r.startswith("oomdoctor"))
    assert install < code
    assert copies


def test_runs_the_entry_point_make_serve_runs(docker, make):
    recipe = make["serve"][1]
    [serve] = [shlex.split(line) for line in recipe if "gunicorn" in line]
    serve[0] = Path(serve[0]).name  # $(BIN)/gunicorn → gunicorn
    [cmd] = args(docker, "CMD")
    assert exec_form(cmd) == serve == ["gunicorn", "-c", "gunicorn.conf.py", "app:app"]
    assert not args(docker, "ENTRYPOINT")


def test_copies_what_the_app_needs(docker):
    copied = set()
    for rest in args(docker, "COPY"):
        assert not rest.startswith("--from"), "single-stage image expected"
        *sources, _dest = rest.split()
        copied.update(s.rstrip("/") for s in sources)
    for needed in ("requirements.txt", "oomdoctor", "knowledge", "rules", "app.py", "gunicorn.conf.py"):
        assert needed in copied, f"{needed} is not copied"
        assert (ROOT / needed).exists()


def test_dockerignore_keeps_secrets_and_state_out_but_not_the_code(docker):
    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
                if p.strip() and not p.startswith("#")]
    for must in (".git", ".venv", "var", ".env"):
        assert must in patterns, f".dockerignore should exclude {must}"
    for rest in args(docker, "COPY"):
        for source in rest.split()[:-1]:
            source = source.rstrip("/")
            assert not any(fnmatch.fnmatch(source, p.rstrip("/")) for p in patterns), f"{source} is ignored"


def test_runs_as_a_non_root_user(docker):
    users = args(docker, "USER")
    assert users, "no USER: the server would run as root"
    assert users[-1].split(":")[0] not in ("root", "0")
    words = [w for w, _ in docker]
    last_user = len(words) - 1 - words[::-1].index("USER")
    assert last_user < words.index("CMD")
    assert not any(w == "RUN" for w in words[last_user:]), "RUN after USER would need root"


def test_data_volume_holds_the_database(docker):
    env = dict(part.split("=", 1) for rest in args(docker, "ENV") for part in shlex.split(rest))
    assert env["OOMDOCTOR_DATABASE"] == "/data/oomdoctor.sqlite3"
    assert args(docker, "VOLUME") == ["/data"]
    assert env["OOMDOCTOR_BIND"] == "0.0.0.0:8000"
    assert args(docker, "EXPOSE") == [env["OOMDOCTOR_BIND"].rsplit(":", 1)[1]]
    # The unprivileged user owns the mount point, or SQLite cannot write there.
    assert any("chown" in r and "/data" in r for r in args(docker, "RUN"))


def test_lint(docker):
    for word, rest in docker:
        if word == "ADD":
            assert not re.match(r"(https?|ftp)://", rest), "ADD of a URL: use RUN with a checked download"
        if word == "RUN":
            for command in re.split(r"&&|;", rest):
                if re.search(r"\bpip3? install\b", command):
                    assert "--no-cache-dir" in command, f"pip without --no-cache-dir: {command.strip()}"
                if "apt-get install" in command:
                    assert "--no-install-recommends" in command
            assert "sudo " not in rest
            assert "curl " not in rest and "wget " not in rest
    assert "MAINTAINER" not in [w for w, _ in docker]


def healthcheck(docker) -> list[str]:
    [rest] = args(docker, "HEALTHCHECK")
    assert "--interval" in rest and "--timeout" in rest
    _, _, command = rest.partition("CMD ")
    return exec_form(command)


def test_healthcheck_uses_python_not_curl(docker):
    command = healthcheck(docker)
    assert command[0] == "python" and "/healthz" in " ".join(command)


@pytest.mark.server
def test_healthcheck_command_works_against_a_real_server(docker, live_server):
    command = [sys.executable] + healthcheck(docker)[1:]
    env = {**os.environ, "OOMDOCTOR_BIND": f"0.0.0.0:{live_server.port}"}
    assert subprocess.run(command, env=env, timeout=20).returncode == 0
    live_server.stop()
    failed = subprocess.run(command, env=env, timeout=20, capture_output=True)
    assert failed.returncode != 0
