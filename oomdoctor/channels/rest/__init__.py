"""The REST channel: JSON consultations, one-shot diagnosis and estimates under /api/v1,
described by an OpenAPI document."""
from __future__ import annotations

from flask import Blueprint

bp = Blueprint("api", __name__)
CHANNEL = "api"

from . import api  # noqa: E402,F401  (adds its routes to bp)
