"""The JSON error handlers: every error any route raises answers ``{"error": ...}`` with its status."""

from __future__ import annotations

import logging

from flask import Flask, jsonify
from werkzeug.exceptions import HTTPException

from ..errors import CapacityError, OdysseusError
from .openai_errors import is_v1, openai_error

log = logging.getLogger(__name__)


def register(app: Flask) -> None:
    """Register the handlers: our errors, capacity (with ``Retry-After``), HTTP errors, anything else (500)."""

    @app.errorhandler(OdysseusError)
    def _odysseus_error(exc: OdysseusError):
        if is_v1():  # the OpenAI-compatible API answers in OpenAI's shape (routes/openai_errors.py)
            return openai_error(exc)
        return jsonify(exc.to_dict()), exc.status

    @app.errorhandler(CapacityError)
    def _capacity(exc: CapacityError):
        if is_v1():
            return openai_error(exc)
        response = jsonify({**exc.to_dict(), "retry_after": exc.retry_after})
        response.headers["Retry-After"] = str(exc.retry_after)
        return response, exc.status

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException):
        if is_v1():
            return openai_error(exc)
        message = {413: "request body too large"}.get(exc.code or 0, exc.description or exc.name)
        return jsonify({"error": message}), exc.code

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception):
        log.exception("unhandled error")
        if is_v1():
            return openai_error(exc)
        return jsonify({"error": "internal error"}), 500
