"""Flask blueprints and the JSON error handlers. Only this package speaks HTTP."""

from __future__ import annotations

import logging

from flask import Flask, jsonify
from werkzeug.exceptions import HTTPException

from ..errors import CapacityError, OdysseusError

log = logging.getLogger(__name__)


def init_app(app: Flask) -> None:
    """Register every blueprint and the error handlers."""
    from . import (agent_routes, auth, auth_routes, background_routes, chat_routes, code_tools_routes, history_routes,
                   memory_routes, meta_routes, page_routes, profile_routes, workflow_routes)
    from .params import AsciiIntConverter

    app.url_map.converters["digits"] = AsciiIntConverter  # before any rule uses <digits:...>
    for module in (chat_routes, history_routes, meta_routes, auth_routes, agent_routes, background_routes,
                   profile_routes, memory_routes, code_tools_routes, page_routes, workflow_routes):
        app.register_blueprint(module.bp)
    auth.init_app(app)
    from . import agent_mode, document_routes, turn_registry

    turn_registry.init_app(app)
    from . import window_routes

    # the model's window (issue 17): before background jobs, whose recovered turns use it at once
    window_routes.init_app(app)
    background_routes.init_app(app)
    from . import research_mode, upload_routes  # uploads + the attachments and retrieval context sources

    upload_routes.init_app(app)

    agent_mode.init_app(app)
    document_routes.init_app(app)
    research_mode.init_app(app)  # research jobs: mode, job rows and the /api/research routes
    from . import page_api

    page_api.init_app(app)  # search, export/import, settings, stream self-test, titles
    from . import branch_routes, compare_routes

    app.register_blueprint(branch_routes.bp)  # regenerate / edit-and-resend branches (issue #20)
    app.register_blueprint(compare_routes.bp)  # keep one reply of a compare (issue #20)
    from . import provider_routes

    app.register_blueprint(provider_routes.bp)  # the admin's provider connections (issue #20)

    @app.errorhandler(OdysseusError)
    def _odysseus_error(exc: OdysseusError):
        return jsonify(exc.to_dict()), exc.status

    @app.errorhandler(CapacityError)
    def _capacity(exc: CapacityError):
        response = jsonify({**exc.to_dict(), "retry_after": exc.retry_after})
        response.headers["Retry-After"] = str(exc.retry_after)
        return response, exc.status

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException):
        message = {413: "request body too large"}.get(exc.code or 0, exc.description or exc.name)
        return jsonify({"error": message}), exc.code

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception):
        log.exception("unhandled error")
        return jsonify({"error": "internal error"}), 500
