"""Any model a user names: its ``config.json`` from the Hugging Face Hub, else the catalog, else the name.

``lookup(name)`` returns a :class:`Resolved` shape and says how it was found:

* ``hub``: the name is a Hub repo id (``org/name``, or a local path or cache
  folder that ends in one) and its ``config.json`` was read with
  ``huggingface_hub.hf_hub_download`` (on-disk cache, a short deadline,
  ``HF_ENDPOINT`` for an internal mirror, ``HF_TOKEN`` for gated repos,
  ``HF_HUB_OFFLINE`` honoured: then only the cache is read).  The switch is
  ``OOMDOCTOR_HUB_LOOKUP`` (``1``/``true`` to turn it on); off by default, so
  the service runs offline with what it ships.
* ``catalog``: the name is a catalog model or one of its aliases.
* ``name``: neither; family and size are parsed from the name (``name_parse``).

A config the Hub returns is read like a pasted one (``hf_config.from_hf_config``):
its architecture is all the estimate needs, so a fine-tune under a new name
resolves through its own ``config.json``.
"""
from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .hf_config import from_hf_config
from .shape import ModelShape, ShapeError

__all__ = ["Resolved", "HubError", "lookup", "repo_id_of", "fetch_config", "enabled", "clear_cache"]

log = logging.getLogger(__name__)

ENV_SWITCH = "OOMDOCTOR_HUB_LOOKUP"
ENV_TIMEOUT = "OOMDOCTOR_HUB_TIMEOUT"
ENV_CACHE = "OOMDOCTOR_HUB_CACHE"
DEFAULT_TIMEOUT_S = 5.0
MAX_CONFIG_BYTES = 1 << 20
_TRUE = {"1", "true", "yes", "on"}

# Hub repo ids: an owner and a name of letters, digits, '-', '_', '.' (huggingface_hub's validate_repo_id).
_PART = r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}"
_REPO_RE = re.compile(rf"^({_PART})/({_PART})$")
_CACHE_DIR_RE = re.compile(rf"^models--({_PART})--({_PART})$")


class HubError(RuntimeError):
    """The Hub could not give a usable config.json (unreachable, not found, gated, not a model); the reason
    in English (``str``) and in Chinese (``zh``)."""

    def __init__(self, en: str, zh: str) -> None:
        super().__init__(en)
        self.zh = zh


@dataclass(frozen=True)
class Resolved:
    shape: ModelShape
    source: str              # "hub" | "catalog" | "name"
    detail: str = ""         # the repo id and revision, the catalog id, or what was parsed from the name
    note: dict[str, str] | None = None   # why an earlier way was not used (the Hub unreachable, lookup off, ...),
                                         # {"en", "zh"}


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "").strip().lower() in _TRUE


def _offline() -> bool:
    return any(os.environ.get(v, "").strip().lower() in _TRUE for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def repo_id_of(text: str) -> str | None:
    """The Hub repo id a name stands for: ``org/name`` itself, the last two parts of a local path
    (``/data/models/Qwen/Qwen2.5-7B``), or a hub cache folder (``models--org--name/snapshots/<sha>``)."""
    if not isinstance(text, str):
        return None
    s = text.strip().strip("'\"`").rstrip("/\\")
    if not s or len(s) > 512 or any(c.isspace() for c in s):
        return None
    if s.startswith(("https://huggingface.co/", "http://huggingface.co/", "hf://")):
        s = s.split("huggingface.co/", 1)[-1].removeprefix("hf://")
        s = "/".join(s.split("/")[:2])
    parts = [p for p in re.split(r"[/\\]", s) if p]
    for i, part in enumerate(parts):
        m = _CACHE_DIR_RE.match(part)
        if m:
            return f"{m.group(1)}/{m.group(2)}"
    if len(parts) < 2:
        return None
    cand = f"{parts[-2]}/{parts[-1]}"
    m = _REPO_RE.match(cand)
    if not m or parts[-1].lower().endswith((".json", ".safetensors", ".bin", ".gguf")) or ".." in cand:
        return None
    return cand


# ------------------------------------------------------------------ the Hub client
_CACHE: "OrderedDict[tuple[str, str, str], tuple[dict[str, Any], str]]" = OrderedDict()
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 256


def clear_cache() -> None:
    with _CACHE_LOCK:
        _CACHE.clear()


def _download(repo_id: str, revision: str | None, endpoint: str | None, token: str | None, offline: bool,
              cache_dir: str | None, timeout: float) -> str:
    from huggingface_hub import hf_hub_download

    return hf_hub_download(repo_id, "config.json", revision=revision, endpoint=endpoint, token=token,
                           cache_dir=cache_dir, local_files_only=offline, etag_timeout=timeout)


def fetch_config(repo_id: str, revision: str | None = None, timeout: float | None = None) -> tuple[dict[str, Any], str]:
    """``(config, where)``: the repo's config.json, read through huggingface_hub and its cache.

    Raises :class:`HubError` with a plain reason.  The call runs in a worker thread with a deadline, so a
    slow mirror costs at most ``timeout`` seconds (``OOMDOCTOR_HUB_TIMEOUT``, default 5).
    """
    if not _REPO_RE.match(repo_id or ""):
        raise HubError(f"{repo_id!r} is not a Hub repo id", f"{repo_id!r} 不是 Hub 仓库 id")
    endpoint = (os.environ.get("HF_ENDPOINT") or "").rstrip("/") or None
    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN") or None
    offline = _offline()
    cache_dir = os.environ.get(ENV_CACHE) or None
    if timeout is None:
        try:
            timeout = float(os.environ.get(ENV_TIMEOUT) or DEFAULT_TIMEOUT_S)
        except ValueError:
            timeout = DEFAULT_TIMEOUT_S
    timeout = min(max(timeout, 0.1), 60.0)
    key = (endpoint or "", repo_id, revision or "main")
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    result: dict[str, Any] = {}

    def work() -> None:
        try:
            result["path"] = _download(repo_id, revision, endpoint, token, offline, cache_dir, timeout)
        except BaseException as exc:    # reported to the caller below; a thread must not raise
            result["error"] = exc

    worker = threading.Thread(target=work, name=f"hub-config-{repo_id}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise HubError(f"the Hub did not answer within {timeout:g} s", f"Hub 在 {timeout:g} 秒内没有应答")
    if "error" in result:
        raise HubError(*_reason(result["error"], offline)) from None
    path = Path(result["path"])
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise HubError(f"{repo_id}'s config.json is larger than {MAX_CONFIG_BYTES} bytes",
                           f"{repo_id} 的 config.json 超过 {MAX_CONFIG_BYTES} 字节")
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise HubError(f"{repo_id}'s config.json could not be read: {exc}",
                       f"{repo_id} 的 config.json 无法读取：{exc}") from None
    if not isinstance(config, dict):
        raise HubError(f"{repo_id}'s config.json is not a JSON object", f"{repo_id} 的 config.json 不是 JSON 对象")
    # The snapshot folder is named after the commit the file came from.
    where = f"{repo_id}@{path.parent.name[:12]}" if re.fullmatch(r"[0-9a-f]{40}", path.parent.name) else repo_id
    with _CACHE_LOCK:
        _CACHE[key] = (config, where)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return config, where


def _reason(exc: BaseException, offline: bool) -> tuple[str, str]:
    names = []
    seen = exc
    while seen is not None and len(names) < 8:
        names.append(type(seen).__name__)
        seen = seen.__cause__ or seen.__context__
    known = ("GatedRepoError", "RepositoryNotFoundError", "EntryNotFoundError", "RemoteEntryNotFoundError",
             "RevisionNotFoundError")
    name = next((n for n in names if n in known), names[0])
    if name == "GatedRepoError":
        return ("the repo is gated: set HF_TOKEN to a token that has been granted access",
                "该仓库需要授权：请把 HF_TOKEN 设为已获准访问的 token")
    if name == "RepositoryNotFoundError":
        return ("no such repo on the Hub (or it is private and HF_TOKEN cannot see it)",
                "Hub 上没有这个仓库（或它是私有的，HF_TOKEN 无权查看）")
    if name in ("EntryNotFoundError", "RemoteEntryNotFoundError"):
        return "the repo has no config.json", "该仓库没有 config.json"
    if name == "RevisionNotFoundError":
        return "no such revision", "没有这个版本（revision）"
    if offline:
        return ("not in the local Hub cache, and HF_HUB_OFFLINE forbids asking the Hub",
                "本地 Hub 缓存中没有，且 HF_HUB_OFFLINE 不允许访问 Hub")
    if name == "LocalEntryNotFoundError":
        return ("the Hub could not be reached and the config is not in the local cache",
                "无法连接 Hub，本地缓存中也没有该配置")
    return f"the Hub could not be reached ({name})", f"无法连接 Hub（{name}）"


# ------------------------------------------------------------------ resolution
def lookup(name: str, *, hub: bool | None = None) -> Resolved | None:
    """The model a name refers to, and how it was found (see the module docstring); None for no model at all."""
    from .fuzzy import resolve_model
    from .name_parse import parse_model_name

    if not isinstance(name, str) or not name.strip() or len(name) > 512:
        return None
    note = None
    repo = repo_id_of(name)
    use_hub = enabled() if hub is None else hub
    if repo and use_hub:
        try:
            config, where = fetch_config(repo)
            shape = from_hf_config(config, id=repo)
            return Resolved(shape.replace(hf_id=repo, source=f"https://huggingface.co/{repo}"), "hub", where)
        except HubError as exc:
            note = {"en": f"{repo}: {exc}", "zh": f"{repo}：{exc.zh}"}
        except ShapeError as exc:
            note = {"en": f"{repo}: {exc}", "zh": f"{repo}：其 config.json 无法使用（{exc}）"}
        if note:
            log.info("hub lookup failed: %s", note["en"])
    elif repo and not use_hub:
        note = {"en": f"the Hub lookup is off ({ENV_SWITCH})", "zh": f"Hub 查询未开启（{ENV_SWITCH}）"}
    shape, score, alias = resolve_model(name)
    if shape is not None:
        return Resolved(shape, "catalog", shape.id, note)
    parsed = parse_model_name(name)
    if parsed is not None:
        return Resolved(parsed.shape, "name", parsed.describe(), note)
    return None
