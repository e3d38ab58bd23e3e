"""Every error as JSON with a message; never a stack trace or a path."""
from __future__ import annotations

import logging

from flask import Flask, jsonify
from werkzeug.exceptions import HTTPException

from ..service import OutOfTime

log = logging.getLogger(__name__)


class BadInput(Exception):
    """A request the service understands but refuses, with a status and a message."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def init_app(app: Flask) -> None:
    @app.errorhandler(BadInput)
    def bad_input(exc: BadInput):
        return jsonify(error=exc.message, status=exc.status), exc.status

    @app.errorhandler(OutOfTime)
    def out_of_time(exc: OutOfTime):
        log.warning("a request's work ran past its budget of %g s; answered 422", exc.seconds)
        message = (f"reading this message took longer than the {exc.seconds:g} s a request may take: send the part "
                   "around the error (the traceback, the config and the launch command), not the whole log")
        return jsonify(error=message, status=422), 422

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        from . import input

        message, code = exc.description or exc.name, exc.code
        if code == 413 and input.too_many_parts():
            # Werkzeug says 413 for a form of too many parts too; it is a bad form, not a big one.
            message, code = f"the form has more than {app.config['MAX_FORM_PARTS']} parts", 400
        elif code == 413:
            limit = app.config["MAX_MESSAGE_BYTES"]
            message = f"request too large: the limit for a message is {limit} bytes"
        return jsonify(error=message, status=code), code

    @app.errorhandler(Exception)
    def unexpected(exc: Exception):
        log.exception("unhandled error")
        return jsonify(error="internal error; it has been logged", status=500), 500
