"""Flask blueprints and the JSON error handlers. Only this package speaks HTTP."""

from __future__ import annotations

import logging

from flask import Flask, jsonify
from werkzeug.exceptions import HTTPException

from ..errors import OdysseusError

log = logging.getLogger(__name__)


def init_app(app: Flask) -> None:
    """Register every blueprint and the error handlers."""
    from . import (agent_routes, auth, auth_routes, background_routes, chat_routes, code_tools_routes, history_routes,
                   meta_routes, page_routes, profile_routes)

    for module in (chat_routes, history_routes, meta_routes, auth_routes, agent_routes, background_routes,
                   profile_routes, code_tools_routes, page_routes):
        app.register_blueprint(module.bp)
    auth.init_app(app)
    background_routes.init_app(app)
    from . import agent_mode

    agent_mode.init_app(app)

    @app.errorhandler(OdysseusError)
    def _odysseus_error(exc: OdysseusError):
        return jsonify(exc.to_dict()), exc.status

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException):
        message = {413: "request body too large"}.get(exc.code or 0, exc.description or exc.name)
        return jsonify({"error": message}), exc.code

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception):
        log.exception("unhandled error")
        return jsonify({"error": "internal error"}), 500
