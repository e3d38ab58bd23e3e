"""What a request of an HTTP channel works with: this request's store handle and the application service."""
from __future__ import annotations

from flask import current_app, g

from ..service import Consultations
from ..storage import Store


def store() -> Store:
    """This request's store handle, opened on first use and closed at teardown."""
    if "store" not in g:
        g.store = Store(current_app.config["DATABASE"], migrate=False)
    return g.store


def service() -> Consultations:
    """The application service for this request."""
    return Consultations(current_app.extensions["oomdoctor.consultant"], store)
