"""Who may call what, how often, and what every response carries.

One `init_app(app)` adds, for every request:

- the API token (``OOMDOCTOR_API_TOKEN``): /api/ needs ``Authorization: Bearer <token>``
  (the OpenAPI document, /healthz, the web page and /slack/ stay open; Slack has its own signature);
- rate limits per client address before anything is parsed or verified, then per verified
  identity (an API token here, a Slack user in the Slack channel after its signature check,
  through ``limit_verified``), counted in the database so that every gunicorn worker (and every
  host on one PostgreSQL) sees the same counts (``OOMDOCTOR_RATE_LIMIT_PER_MINUTE``), 429 + Retry-After; the address is
  the socket's, or behind ``TRUSTED_PROXIES`` proxies the one they forwarded;
- CSRF protection for the web page's form posts: a token in a cookie and in a hidden
  ``csrf_token`` field (templates call ``csrf_token()``), checked for every POST outside
  /api/, /slack/ and /lark/, where only the page's forms are taken (other bodies: 415);
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
# Each has its own proof of origin: the API token, Slack's and Lark's signatures.
CSRF_EXEMPT = ("/api/", "/slack/", "/lark/")
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
    trust_proxies(app)
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

def trust_proxies(app: Flask) -> None:
    """Behind TRUSTED_PROXIES proxies, take the client's address (and scheme) from what the
    outermost of them saw (X-Forwarded-For, X-Forwarded-Proto); with none trusted, from the
    socket. An X-Forwarded-For that no trusted proxy wrote is a client's claim, never used."""
    proxies = int(app.config.get("TRUSTED_PROXIES", 0) or 0)
    if proxies > 0:
        from werkzeug.middleware.proxy_fix import ProxyFix
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=proxies, x_proto=proxies)


def client_ip() -> str:
    """The client's address (see `trust_proxies`)."""
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
    per_minute = int(current_app.config.get("RATE_LIMIT_PER_MINUTE") or 0)
    if per_minute > 0:
        # By address, before anything is parsed or verified: nothing a client writes in the
        # body (a Slack user id, a token) can choose whose budget a request is counted in.
        refused = _count("ip:" + client_ip()[:64], per_minute)
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
    # The token's own budget, whatever address it comes from.
    return limit_verified("token:" + hashlib.sha256(given.encode("utf-8", "surrogatepass")).hexdigest()[:32])


def limit_verified(key: str):
    """Count a request against an authenticated identity's own budget (a token, a Slack user);
    a 429 response when it is spent, else None. Call it only after the identity is verified."""
    per_minute = int(current_app.config.get("RATE_LIMIT_PER_MINUTE") or 0)
    return _count(key, per_minute) if per_minute > 0 else None


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


_FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")


def _check_csrf() -> None:
    if request.method not in _UNSAFE or request.path.startswith(CSRF_EXEMPT):
        return
    if request.mimetype not in _FORMS and request.content_length != 0:
        # Outside /api/, /slack/ and /lark/ only the page's own forms are taken (its script sends them
        # as they are): a JSON body there would be a token-free way round the API.
        raise BadInput("this address takes the web page's form only; the API is under /api/v1/", 415)
    if not current_app.config.get("CSRF_ENABLED", True):
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
