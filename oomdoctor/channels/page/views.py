"""The web page: paste a log, answer follow-up questions, read the report.

Plain forms that work without JavaScript (POST, then redirect to `/c/<id>`);
static/page.js makes the same requests with `Accept: application/json` and swaps
the returned HTML in place. Every string comes from knowledge/texts.yaml.
"""
from __future__ import annotations

from typing import Any

from flask import abort, current_app, jsonify, redirect, render_template, request, url_for
from markupsafe import Markup
from werkzeug.exceptions import RequestEntityTooLarge

from ...language import LANGUAGES
from ...render import svg
from ...render.text import change_blocks
from ...service import NotFound, OutOfTime
from ...templating import show
from ...web import input as check
from ...web.context import service
from ...web.errors import BadInput
from ...web.security import CSRFError
from . import CHANNEL, bp
UPLOAD_FIELD = "logfile"
# How much of an earlier message the conversation shows before "show all".
PREVIEW_CHARS = 600
REPLY_STATUSES = ("question", "report")


def _lang(stored: str | None = None) -> str:
    """The page's language: ?lang=, else the consultation's, else the browser's (forms keep ?lang= in their action)."""
    raw = request.args.get("lang")
    if raw in LANGUAGES:
        return raw
    if stored in LANGUAGES:
        return stored
    return request.accept_languages.best_match(LANGUAGES) or current_app.config["DEFAULT_LANG"]


def _t(lang: str):
    kb = service().kb
    return lambda key, **kw: kb.text(key, lang, **kw)


def _wants_json() -> bool:
    best = request.accept_mimetypes.best_match(["text/html", "application/json"])
    return best == "application/json" and request.accept_mimetypes[best] > request.accept_mimetypes["text/html"]


def _skip_word(lang: str) -> str:
    return service().kb.texts["skip.words"][lang].split("|")[0]


class PageError(Exception):
    """Input the page refuses, named by a text key so it is shown in the user's language."""

    def __init__(self, key: str, status: int = 400, **values: Any) -> None:
        super().__init__(key)
        self.key, self.status, self.values = key, status, values


def _checked(text: str) -> str:
    limit = check.message_limit("page")
    try:
        return check.message_text(text, limit)
    except BadInput as exc:
        if exc.status == 413:
            raise PageError("error.too_large", 413, size=len(text.encode("utf-8", "surrogatepass")), limit=limit) from None
        if not text.strip():
            raise PageError("error.empty") from None
        raise PageError("error.binary") from None


def _submitted_text() -> str:
    """The textarea, with an uploaded file's text appended (the no-JavaScript way to send a file)."""
    text = request.form.get("message", "")
    upload = request.files.get(UPLOAD_FIELD)
    if upload and upload.filename:
        data = upload.read(check.message_limit("page") + 1)
        try:
            content = data.decode("utf-8")
        except UnicodeDecodeError:
            raise PageError("error.binary") from None
        text = f"{text.rstrip()}\n\n{content}" if text.strip() else content
    return text


def _answer_text(lang: str) -> str:
    """What the user said: the skip button, their own words, or the option they picked."""
    if request.form.get("skip"):
        return _skip_word(lang)
    own = request.form.get("message", "")
    if own.strip():
        return own
    choice = request.form.get("choice", "")
    if choice.strip():
        return choice
    raise PageError("ui.error_no_answer")


def _context(lang: str, **extra: Any) -> dict[str, Any]:
    return {"lang": lang, "t": _t(lang), "languages": LANGUAGES, "show": show, "change_blocks": change_blocks,
            "max_bytes": check.message_limit("page"), "upload_field": UPLOAD_FIELD, **extra}


def _conversation(cid: str, lang: str | None = None, **extra: Any) -> tuple[dict[str, Any], str]:
    """The page's context for a consultation the page started; abort(404) for any other id."""
    found = _found(cid, lang, **extra)
    if found is None:
        abort(404)
    return found


def _found(cid: str, lang: str | None = None, **extra: Any) -> tuple[dict[str, Any], str] | None:
    """`_conversation` for the error handlers, which must not abort inside themselves: None when not found."""
    try:
        record = service().record(cid, channel=CHANNEL)
    except NotFound:
        return None
    lang = lang or _lang(record["lang"] or None)
    # Only turns with a question or a report (Slack's `/oom lang` stores a setting, not a reply).
    messages = [m for m in record["messages"] if m["reply"].get("status") in REPLY_STATUSES]
    reply = messages[-1]["reply"] if messages else None
    chart = Markup(svg.breakdown(reply, service().kb)) if reply and reply["status"] == "report" else ""
    ctx = _context(lang, cid=cid, earlier=messages[:-1], latest=messages[-1] if messages else None,
                   reply=reply, chart=chart, preview_chars=PREVIEW_CHARS, **extra)
    return ctx, lang


def _after_turn(cid: str, lang: str):
    url = url_for(".consultation", cid=cid, lang=lang)
    if _wants_json():
        ctx, _ = _conversation(cid, lang)
        t = ctx["t"]
        heading = t("report.title") if ctx["reply"]["status"] == "report" else t("report.question")
        return jsonify(id=cid, url=url, status=ctx["reply"]["status"], title=f"{heading} — {t('ui.title')}",
                       html=render_template("_conversation.html", **ctx))
    return redirect(url, 303)


def _refused(exc: PageError, template: str, ctx: dict[str, Any]):
    message = _t(ctx["lang"])(exc.key, **exc.values)
    if _wants_json():
        return jsonify(error=message, status=exc.status), exc.status
    return render_template(template, **ctx, error=message), exc.status


@bp.get("/")
def index():
    lang = _lang()
    return render_template("index.html", **_context(lang, text="", error=None))


@bp.post("/")
def start():
    lang = _lang()
    try:
        message = _checked(_submitted_text())
    except PageError as exc:
        # What was typed goes back into the box (an uploaded file's text is not added to it).
        return _refused(exc, "index.html", _context(lang, text=request.form.get("message", "")))
    cid, _ = service().start(message, channel=CHANNEL, lang=lang)
    return _after_turn(cid, lang)


@bp.get("/favicon.ico")
def favicon():
    # Browsers ask for /favicon.ico on their own (the page links the SVG, but a JSON tab or an old browser does not).
    return redirect(url_for(".static", filename="favicon.svg"), 301)


@bp.get("/c/<cid>")
def consultation(cid: str):
    ctx, _ = _conversation(cid)
    return render_template("consultation.html", **ctx, error=None, text="")


@bp.post("/c/<cid>")
def answer(cid: str):
    lang = _lang()
    try:
        message = _checked(_answer_text(lang))
        service().reply(cid, message, lang, channel=CHANNEL)
    except PageError as exc:
        ctx, _ = _conversation(cid, lang)
        return _refused(exc, "consultation.html", {**ctx, "text": request.form.get("message", "")})
    except NotFound:
        abort(404)
    return _after_turn(cid, lang)


@bp.errorhandler(404)
def not_found(_exc):
    lang = _lang()
    message = _t(lang)("error.not_found")
    if _wants_json():
        return jsonify(error=message, status=404), 404
    return render_template("index.html", **_context(lang, text="", error=message)), 404


@bp.errorhandler(RequestEntityTooLarge)
def too_large(_exc):
    # The body was refused unread, so the text cannot be put back; with JavaScript it never left the page.
    lang = _lang()
    if check.too_many_parts():
        exc = PageError("error.form_parts", 400, limit=current_app.config["MAX_FORM_PARTS"])
    else:
        exc = PageError("error.too_large", 413, size=check.body_size() or 0, limit=check.message_limit("page"))
    return _refused(exc, "index.html", _context(lang, text=""))


@bp.errorhandler(OutOfTime)
def too_slow(exc: OutOfTime):
    # Nothing was stored (the turn stopped before it was); the text goes back into the box.
    lang = _lang()
    refusal = PageError("error.too_slow", 422, seconds=f"{exc.seconds:g}")
    cid = request.view_args.get("cid") if request.view_args else None
    found = _found(cid, lang) if cid else None
    if found is not None:
        return _refused(refusal, "consultation.html", {**found[0], "text": request.form.get("message", "")})
    return _refused(refusal, "index.html", _context(lang, text=request.form.get("message", "")))


@bp.errorhandler(CSRFError)
def expired(_exc):
    # The form came without this browser's token (an old tab, cookies cleared): say so, keep the text.
    lang = _lang()
    exc = PageError("ui.error_expired", 400)
    cid = request.view_args.get("cid") if request.view_args else None
    found = _found(cid, lang) if cid else None
    if found is not None:
        return _refused(exc, "consultation.html", {**found[0], "text": request.form.get("message", "")})
    return _refused(exc, "index.html", _context(lang, text=request.form.get("message", "")))
