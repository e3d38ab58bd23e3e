"""The web page channel: paste a log, answer follow-up questions, read the report."""
from __future__ import annotations

from flask import Blueprint

bp = Blueprint("page", __name__, template_folder="templates", static_folder="static", static_url_path="/static")
CHANNEL = "web"

from . import views  # noqa: E402,F401  (adds its routes to bp)
