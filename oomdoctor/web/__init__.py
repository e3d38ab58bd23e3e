"""The Flask application, assembled: the web layer (security, errors, input bounds, the request
context) under the HTTP channels (REST API, web page, Slack, MCP over streamable HTTP, Lark),
each a blueprint registered here.
A channel reaches the application service through `web.context.service()` and knows nothing
of the others."""
from __future__ import annotations

from typing import Any

from flask import Flask, g

from .. import config as config_mod
from ..catalog import resolve_gpu_id, resolve_model_id
from ..consultation import default
from ..storage import Store


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    # The page channel serves its own static files.
    app = Flask(__name__, static_folder=None)
    app.config.update(config_mod.from_environment())
    if test_config:
        app.config.update(test_config)
    app.config["MAX_CONTENT_LENGTH"] = app.config["MAX_MESSAGE_BYTES"] + 64 * 1024
    # A form's text field may be as long as the body: the page's message is one (Flask's own
    # limit, 500 kB, refused a pasted log sent by the page's script as "too large").
    app.config["MAX_FORM_MEMORY_SIZE"] = app.config["MAX_CONTENT_LENGTH"]
    app.json.ensure_ascii = False
    app.json.sort_keys = False
    # Fail at start, not on the first request: a broken knowledge file or an
    # unusable database is reported once, clearly.
    # One knowledge base per process: gunicorn's master loads it once (preload_app) and workers fork with it.
    app.extensions["oomdoctor.consultant"] = default()
    # The catalogs' name indexes are built on first use (about 0.3 s): build them here, so that no
    # request spends its work budget (OOMDOCTOR_WORK_SECONDS) on them.
    resolve_model_id("llama-3-8b")
    resolve_gpu_id("a100")
    Store(app.config["DATABASE"]).close()

    from . import errors, input, security
    from ..channels import lark, page, rest, slack
    from ..channels.mcp import http as mcp_http
    errors.init_app(app)
    # First of all hooks: the request's clock starts, and a body sent without a length is read
    # (bounded) before anything parses it.
    app.before_request(input.start_clock)
    app.before_request(input.whole_body)
    app.teardown_request(input.stop_clock)
    security.init_app(app)
    for channel in (rest, page, slack, mcp_http, lark):
        app.register_blueprint(channel.bp)

    @app.teardown_appcontext
    def close_store(_exc: BaseException | None) -> None:
        store = g.pop("store", None)
        if store is not None:
            store.close()

    return app

