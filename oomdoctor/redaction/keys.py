"""Which names say their value is a credential, and which values look like one.

A name is split into words whatever its style (`clientSecret`, `HF_TOKEN`, `x-api-key`,
`db.password`, `AccountKey`), and its last word decides, as a person reading it would:
`password`, `secret` and `apikey` always name a secret; `key` and `token` do only after a
word that makes them one (`api_key`, `access_token`) and are otherwise a credential only when
their value looks random (`"key": "9f3c…"` in kaggle.json, but not `pad_token: <unk>`).
"""
from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import NamedTuple

# Upper-case runs before a capitalised word (`APIKey` -> API, Key), words, digits; CJK as one word.
_WORDS = re.compile(r"[A-Z]{1,64}(?=[A-Z][a-z])|[A-Z]?[a-z]{1,64}|[A-Z]{1,64}|[0-9]{1,64}|[\u4e00-\u9fff]{1,16}")

_PASSWORD = {"password", "passwd", "pwd", "pass", "passphrase", "passcode", "密码", "口令"}
_SECRET = {"secret", "secrets", "credential", "credentials", "creds", "密钥"}
_APIKEY = {"apikey", "api_key"}
# "..._key" is a credential after one of these; `key` alone, `cache_key`, `sort_key` are not.
_KEY_OWNERS = {"api", "access", "secret", "private", "auth", "account", "shared", "master", "encryption",
               "signing", "subscription", "license", "client", "app", "consumer", "service", "storage", "admin",
               "session", "wandb", "openai", "anthropic", "hf", "deepseek", "dashscope", "cohere", "mistral",
               "gemini", "google", "groq", "together", "replicate", "kaggle", "comet", "neptune", "mlflow",
               "clearml", "modelscope", "zhipu", "moonshot", "stripe", "sendgrid", "azure", "aws", "gcp"}
# "..._token" is a credential only after one of these; pad_token, eos_token and the like are tokenizer settings.
_TOKEN_OWNERS = {"access", "auth", "api", "hub", "hf", "huggingface", "face", "bearer", "refresh", "session",
                 "github", "gh", "gitlab", "slack", "bot", "app", "user", "wandb", "openai", "anthropic", "oauth",
                 "personal", "secret", "private", "id", "login", "write", "read", "csrf", "xsrf", "service",
                 "registry", "npm", "pypi", "docker", "cloudflare", "discord", "telegram", "modelscope", "auth2",
                 "security", "sas", "deploy", "runner", "job", "ci", "pat", "jwt", "client", "admin", "master",
                 "upload", "publish", "webhook", "notion", "linear", "sentry", "vault", "令牌"}
_TOKEN = {"token", "令牌"}
_SIGNATURE = {"sig", "signature"}
_AUTH = {"auth"}
_AUTHORIZATION = {"authorization"}
# Two-word names whose last word alone says nothing: `webhook_url` holds its secret in the URL.
_SECRET_PAIRS = {("webhook", "url"), ("connection", "string"), ("sas", "url")}


class KeyKind(NamedTuple):
    kind: str          # password, secret, api_key, key, token, signature, authorization
    strong: bool       # any value is a secret; otherwise only a random-looking one
    words: tuple[str, ...]


# Secret words glued to the word before them: `PGPASSWORD`, `authtoken`, `secretkey`.
_GLUED = ("password", "passwd", "passphrase", "secret", "token", "apikey", "key")
# Shell variables that only look like one: the working directory.
_NOT_SECRETS = {("pwd",), ("oldpwd",)}


def words(key: str) -> tuple[str, ...]:
    found = [w.lower() for w in _WORDS.findall(key)]
    if found:
        last = found[-1]
        for word in _GLUED:
            if last.endswith(word) and len(last) > len(word) and last not in _APIKEY:
                found[-1:] = [last[:-len(word)], word]
                break
    return tuple(found)


@lru_cache(maxsize=4096)
def classify(key: str) -> KeyKind | None:
    """What the value of `key` is, if the name says it is a credential."""
    ws = words(key)
    if not ws or ws in _NOT_SECRETS:
        return None
    last = ws[-1]
    before = ws[-2] if len(ws) >= 2 else ""
    if last in _PASSWORD:
        return KeyKind("password", True, ws)
    if last in _SECRET:
        return KeyKind("secret", True, ws)
    if last in _APIKEY or (last == "key" and before == "api"):
        return KeyKind("api_key", True, ws)
    if last == "key":
        return KeyKind("key", before in _KEY_OWNERS, ws)
    if last in _TOKEN:
        return KeyKind("token", len(ws) == 1 or before in _TOKEN_OWNERS, ws)
    if last in _AUTHORIZATION:
        return KeyKind("authorization", True, ws)
    if last in _AUTH:
        return KeyKind("token", False, ws)
    if last in _SIGNATURE:
        return KeyKind("signature", False, ws)
    if (before, last) in _SECRET_PAIRS:
        return KeyKind("secret", True, ws)
    return None


def secret_key(key: str) -> bool:
    """Whether any value assigned to `key` (``HF_TOKEN``, ``db.password``, ``--api-key``) is a secret."""
    found = classify(key)
    return found is not None and found.strong


_TOKENISH = re.compile(r"[A-Za-z0-9+/=_.~%-]{1,4096}")
_HEX = re.compile(r"[0-9a-fA-F]{1,4096}")


_DIGITS = frozenset("0123456789")
_LOWERS = frozenset("abcdefghijklmnopqrstuvwxyz")
_UPPERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")


# c * log2(c) for every count a value of up to 4096 characters can have.
_C_LOG_C = [0.0] + [c * math.log2(c) for c in range(1, 4097)]


def entropy(value: str) -> float:
    """Shannon entropy in bits per character: log2(n) - sum(c log2 c) / n over the counts c."""
    n = len(value)
    if not 0 < n <= 4096:
        return 0.0
    return math.log2(n) - sum(map(_C_LOG_C.__getitem__, map(value.count, set(value)))) / n


@lru_cache(maxsize=8192)
def looks_random(value: str, min_length: int = 16) -> bool:
    """Whether a value looks like a generated credential rather than a word, a path or a number.

    The thresholds follow secret scanners' generic rules (gitleaks' generic-api-key asks 3.5
    bits per character): random base64 or base62 of 16+ characters passes, hex at 3.0 since it
    has only 16 symbols; words, paths, version strings and repeated characters do not.
    """
    if not min_length <= len(value) <= 4096 or not _TOKENISH.fullmatch(value):
        return False
    if value[0] in "/." or "://" in value or ".." in value:
        return False
    chars = set(value)
    has_digit = not chars.isdisjoint(_DIGITS)
    has_lower = not chars.isdisjoint(_LOWERS)
    has_upper = not chars.isdisjoint(_UPPERS)
    if not ((has_digit and (has_lower or has_upper)) or (has_lower and has_upper and len(value) >= 20)):
        return False
    return entropy(value) >= (3.0 if _HEX.fullmatch(value) else 3.5)
