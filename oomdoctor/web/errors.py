"""Every error as JSON with a message; never a stack trace or a path."""
from __future__ import annotations

import logging

from flask import Flask, jsonify
from werkzeug.exceptions import HTTPException

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

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        message = exc.description or exc.name
        if exc.code == 413:
            limit = app.config["MAX_MESSAGE_BYTES"]
            message = f"request too large: the limit for a message is {limit} bytes"
        return jsonify(error=message, status=exc.code), exc.code

    @app.errorhandler(Exception)
    def unexpected(exc: Exception):
        log.exception("unhandled error")
        return jsonify(error="internal error; it has been logged", status=500), 500
