"""The Flask application factory; channels are blueprints registered here."""
from __future__ import annotations

from typing import Any

from flask import Flask, g

from .. import config as config_mod
from ..consultation import Consultant
from ..knowledge import load
from ..storage import Store


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    app = Flask(__name__)
    app.config.update(config_mod.from_environment())
    if test_config:
        app.config.update(test_config)
    app.config["MAX_CONTENT_LENGTH"] = app.config["MAX_MESSAGE_BYTES"] + 64 * 1024
    app.json.ensure_ascii = False
    app.json.sort_keys = False
    # Fail at start, not on the first request: a broken knowledge file or an
    # unusable database is reported once, clearly.
    app.extensions["oomdoctor.consultant"] = Consultant(load())
    Store(app.config["DATABASE"]).close()

    from . import api, errors, security
    errors.init_app(app)
    security.init_app(app)
    app.register_blueprint(api.bp)
    from . import page
    from ..channels import slack
    app.register_blueprint(page.bp)
    app.register_blueprint(slack.bp)

    @app.teardown_appcontext
    def close_store(_exc: BaseException | None) -> None:
        store = g.pop("store", None)
        if store is not None:
            store.close()

    return app


def store() -> Store:
    if "store" not in g:
        from flask import current_app
        g.store = Store(current_app.config["DATABASE"], migrate=False)
    return g.store


def consultant() -> Consultant:
    from flask import current_app
    return current_app.extensions["oomdoctor.consultant"]
