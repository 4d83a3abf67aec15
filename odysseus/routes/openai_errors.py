"""Errors of the OpenAI-compatible API (``/v1``) in OpenAI's shape.

``{"error": {"message", "type", "param", "code"}}`` with the status the SDKs map to their own
exception classes (400 ``BadRequestError``, 401 ``AuthenticationError``, 403 ``PermissionDeniedError``,
404 ``NotFoundError``, 409 ``ConflictError``, 413, 429 ``RateLimitError``, 5xx ``InternalServerError``).
Every error of a ``/v1/`` path goes through ``openai_error``: the blueprints' handlers, and the app's
for what happens before a route is matched (an unknown path, a refused caller).
"""

from __future__ import annotations

from typing import Optional, Tuple

from flask import Response, jsonify, request
from werkzeug.exceptions import HTTPException

from ..errors import CapacityError, InvalidParam, NotFound, OdysseusError, RateLimited

#: status -> (type, default code)
_KINDS = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    409: ("invalid_request_error", "conflict"),
    410: ("invalid_request_error", "expired"),
    413: ("invalid_request_error", "request_too_large"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


def is_v1() -> bool:
    """True while serving a path of the OpenAI-compatible API."""
    return request.path == "/v1" or request.path.startswith("/v1/")


def error_body(
    message: str, status: int, param: Optional[str] = None, code: Optional[str] = None, kind: Optional[str] = None
) -> dict:
    """The OpenAI error object for ``status``."""
    default_kind, default_code = _KINDS.get(status, ("server_error", "server_error"))
    return {"error": {"message": message, "type": kind or default_kind, "param": param, "code": code or default_code}}


def openai_error(exc: BaseException) -> Tuple[Response, int]:
    """Any exception a /v1 request raised, as OpenAI's error response."""
    headers = {}
    if isinstance(exc, InvalidParam):
        status, body = 400, error_body(exc.message, 400, exc.param, exc.code)
    elif isinstance(exc, OdysseusError):
        status = exc.status if 400 <= exc.status < 600 else 500
        code = "model_not_found" if isinstance(exc, NotFound) and "model" in exc.message else None
        body = error_body(exc.message, status, "model" if code else None, code)
        if isinstance(exc, (CapacityError, RateLimited)):
            headers["Retry-After"] = str(
                int(getattr(exc, "retry_after", 1)) + (1 if isinstance(exc, RateLimited) else 0)
            )
    elif isinstance(exc, HTTPException):
        status = exc.code or 500
        message = {413: "request body too large", 404: "Unknown request URL: " + request.path}.get(
            status, exc.description or exc.name
        )
        body = error_body(message, status)
    else:
        status, body = 500, error_body("internal error", 500)
    response = jsonify(body)
    response.headers.update(headers)
    return response, status
