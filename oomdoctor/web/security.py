"""Who may call what, how often, and what every response carries.

One `init_app(app)` adds, for every request:

- the API token (``OOMDOCTOR_API_TOKEN``): /api/ needs ``Authorization: Bearer <token>``
  (the OpenAPI document, /healthz, the web page and /slack/ stay open; Slack has its own signature);
- rate limits per client IP and per token, counted in the database so that every
  gunicorn worker (and every host on one PostgreSQL) sees the same counts (``OOMDOCTOR_RATE_LIMIT_PER_MINUTE``), 429 + Retry-After;
- CSRF protection for the web page's form posts: a token in a cookie and in a hidden
  ``csrf_token`` field (templates call ``csrf_token()``), checked for every non-JSON POST
  outside /api/ and /slack/;
- the owner check on DELETE of a consultation that has an owner (``X-Owner``);
- security headers, and no-store caching for consultations;
- the retention sweep: consultations idle for ``RETENTION_SECONDS`` are deleted at start
  and then every ``RETENTION_SWEEP_SECONDS`` by whichever worker serves a request;
- error bodies that never carry a stack trace or a path inside the server.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import sys
import threading
import time

from flask import Flask, Response, current_app, g, jsonify, request
from werkzeug.exceptions import BadRequest

from ..knowledge import ROOT
from ..storage import NotFound, StorageError, Store, keep_open
from .errors import BadInput

log = logging.getLogger(__name__)

CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'"
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}
# Paths that answer for anyone, however often: monitoring and the page's own files.
OPEN_PATHS = ("/healthz", "/favicon.ico")
OPEN_PREFIXES = ("/static/",)
# Under /api/, what needs no token: the API's own description.
PUBLIC_API = ("/api/openapi.json",)
CSRF_COOKIE = "oomdoctor_csrf"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"
# Paths whose POSTs are not the page's forms: the API (token) and Slack (signature).
CSRF_EXEMPT = ("/api/", "/slack/")
_UNSAFE = ("POST", "PUT", "PATCH", "DELETE")


class CSRFError(BadRequest):
    description = "the form has expired or did not come from this site: reload the page and send it again"


class RetentionSweep:
    """Deletes expired consultations at most once per interval in this process."""

    def __init__(self, started: float) -> None:
        self.last = started
        self.lock = threading.Lock()

    def due(self, now: float, interval: float) -> bool:
        with self.lock:
            if now - self.last < interval:
                return False
            self.last = now
            return True


def init_app(app: Flask) -> None:
    app.extensions["oomdoctor.sweep"] = RetentionSweep(time.time())
    store = Store(app.config["DATABASE"], migrate=False)
    try:
        gone = store.expire(app.config["RETENTION_SECONDS"])
    finally:
        store.close()
    if gone:
        log.info("retention: deleted %d consultations idle for over %d s", gone, app.config["RETENTION_SECONDS"])

    app.before_request(_sweep)
    app.before_request(_limit_and_authorize)
    app.before_request(_check_csrf)
    app.before_request(_check_owner)
    app.after_request(_finish)
    app.jinja_env.globals["csrf_token"] = csrf_token

    @app.errorhandler(StorageError)
    def storage_unavailable(exc: StorageError):
        log.error("storage: %s", exc)
        return jsonify(error="the database is unavailable; try again later", status=503), 503


# ---------------------------------------------------------------- retention (and the WAL kept in place)

def _sweep() -> None:
    keep_open(current_app.config["DATABASE"])
    config = current_app.config
    if not current_app.extensions["oomdoctor.sweep"].due(time.time(), config["RETENTION_SWEEP_SECONDS"]):
        return
    from .context import store
    gone = store().expire(config["RETENTION_SECONDS"])
    if gone:
        log.info("retention: deleted %d consultations idle for over %d s", gone, config["RETENTION_SECONDS"])


# ---------------------------------------------------------------- token and rate limits

def client_ip() -> str:
    """The client's address; behind TRUSTED_PROXIES proxies, the one the outermost of them saw."""
    proxies = int(current_app.config.get("TRUSTED_PROXIES", 0) or 0)
    if proxies > 0:
        forwarded = [part.strip() for part in request.headers.get("X-Forwarded-For", "").split(",") if part.strip()]
        if len(forwarded) >= proxies:
            return forwarded[-proxies]
    return request.remote_addr or "unknown"


def _tokens() -> list[str]:
    return [t.strip() for t in str(current_app.config.get("API_TOKEN") or "").split(",") if t.strip()]


def _bearer() -> str | None:
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def _token_ok(given: str, tokens: list[str]) -> bool:
    # Compare with every configured token, without stopping early, in constant time each.
    ok = False
    for token in tokens:
        ok |= hmac.compare_digest(given.encode("utf-8", "surrogatepass"), token.encode("utf-8"))
    return ok


def _limit_and_authorize():
    path = request.path
    if path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
        return None
    limit = int(current_app.config.get("RATE_LIMIT_PER_MINUTE") or 0)
    if limit > 0:
        refused = _count(_client_key(), limit)
        if refused is not None:
            return refused
    if not path.startswith("/api/") or path in PUBLIC_API:
        return None
    tokens = _tokens()
    if not tokens:
        return None
    given = _bearer()
    if given is None or not _token_ok(given, tokens):
        message = ("this API needs a token: send 'Authorization: Bearer <token>'" if given is None
                   else "the API token is not valid")
        response = jsonify(error=message, status=401)
        response.status_code = 401
        response.headers["WWW-Authenticate"] = 'Bearer realm="oomdoctor"'
        return response
    if limit > 0:
        # The token's own budget, whatever address it comes from.
        return _count("token:" + hashlib.sha256(given.encode("utf-8", "surrogatepass")).hexdigest()[:32], limit)
    return None


def _client_key() -> str:
    if request.path.startswith("/slack/"):
        # Every Slack request comes from Slack's servers: count per workspace user instead.
        request.get_data(cache=True)  # keep the raw body for the signature check before the form is parsed
        team, user = request.form.get("team_id", ""), request.form.get("user_id", "")
        if not (team or user) and request.form.get("payload"):
            try:
                payload = json.loads(request.form["payload"])
                team = str((payload.get("team") or {}).get("id", ""))
                user = str((payload.get("user") or {}).get("id", ""))
            except (ValueError, AttributeError):
                pass
        if team or user:
            return f"slack:{team[:32]}:{user[:32]}"
    return "ip:" + client_ip()[:64]


def _count(key: str, limit: int):
    from .context import store
    now = time.time()
    hits = store().hit(key, int(now // 60))
    if hits <= limit:
        return None
    wait = max(1, 60 - int(now % 60))
    response = jsonify(error=f"too many requests: the limit is {limit} a minute; try again in {wait} s", status=429)
    response.status_code = 429
    response.headers["Retry-After"] = str(wait)
    return response


# ---------------------------------------------------------------- CSRF

def csrf_token() -> str:
    """The token for this browser; put it in every form as a hidden field named `csrf_token`."""
    token = g.get("csrf_token")
    if token is None:
        token = request.cookies.get(CSRF_COOKIE, "")
        if not _well_formed(token):
            token = secrets.token_urlsafe(32)
            g.csrf_cookie = token
        g.csrf_token = token
    return token


def _well_formed(token: str) -> bool:
    return 32 <= len(token) <= 64 and all(c.isalnum() or c in "-_" for c in token)


def _check_csrf() -> None:
    if request.method not in _UNSAFE or request.path.startswith(CSRF_EXEMPT):
        return
    if not current_app.config.get("CSRF_ENABLED", True) or request.is_json:
        return
    cookie = request.cookies.get(CSRF_COOKIE, "")
    given = request.headers.get(CSRF_HEADER) or request.form.get(CSRF_FIELD, "")
    if not _well_formed(cookie) or not hmac.compare_digest(cookie.encode(), given.encode("utf-8", "surrogatepass")):
        raise CSRFError()


# ---------------------------------------------------------------- owner

def _check_owner() -> None:
    if request.method != "DELETE" or request.endpoint != "api.delete_consultation":
        return
    from .context import store
    try:
        owner = store().owner(request.view_args["cid"])
    except NotFound:
        return  # the view says 404
    given = request.headers.get("X-Owner", "")
    if owner and not hmac.compare_digest(owner.encode(), given.encode("utf-8", "surrogatepass")):
        raise BadInput("this consultation belongs to another owner: send the same X-Owner header that created it",
                       403)


# ---------------------------------------------------------------- every response

_INTERNAL = tuple({str(ROOT), sys.prefix, sys.base_prefix, "site-packages", "Traceback (most recent call last)"})


def _finish(response: Response) -> Response:
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)
    if request.path.startswith(("/api/", "/c/")) and "Cache-Control" not in response.headers:
        response.headers["Cache-Control"] = "no-store"
    new_cookie = g.get("csrf_cookie")
    if new_cookie:
        response.set_cookie(CSRF_COOKIE, new_cookie, httponly=True, samesite="Strict", secure=request.is_secure,
                            path="/")
    if response.status_code >= 500 and not response.direct_passthrough:
        _scrub(response)
    return response


def _scrub(response: Response) -> None:
    """A server error whose body names a file of the server or holds a traceback is replaced whole.

    (Only 5xx: a 4xx page may show back the user's own log, tracebacks and all.)
    """
    length = response.calculate_content_length()
    if length is None or length > 256 * 1024:
        return
    body = response.get_data(as_text=True)
    if not any(marker in body for marker in _INTERNAL):
        return
    log.error("an error body held an internal path or a traceback; replaced (status %d)", response.status_code)
    response.set_data(json.dumps({"error": "internal error; it has been logged", "status": response.status_code}))
    response.mimetype = "application/json"
