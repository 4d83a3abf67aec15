"""Reading request input: bodies (JSON or form), cursors and simple typed fields."""

from __future__ import annotations

from typing import Any, Optional

from flask import request

from ..errors import BadRequest


def body() -> dict:
    """The request body as a dict: JSON when sent as JSON, else form fields."""
    if request.is_json or (request.mimetype or "").endswith("+json"):
        data = request.get_json(silent=True)
        if data is None:
            raise BadRequest("malformed JSON body")
        if not isinstance(data, dict):
            raise BadRequest("JSON body must be an object")
        return data
    if request.form:
        return request.form.to_dict()
    raw = request.get_data(cache=True)
    if raw.strip():
        raise BadRequest("send a JSON object (Content-Type: application/json) or form fields")
    return {}


def optional_str(data: dict, key: str, max_len: int = 500) -> Optional[str]:
    """A string field or None; rejects other types and over-long values."""
    value = data.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{key} must be a string")
    if len(value) > max_len:
        raise BadRequest(f"{key} is longer than {max_len} characters")
    return value


def optional_float(data: dict, key: str, low: float, high: float) -> Optional[float]:
    """A number field within [low, high] or None (form strings are parsed)."""
    value: Any = data.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise BadRequest(f"{key} must be a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise BadRequest(f"{key} must be a number") from None
    if not (low <= number <= high):
        raise BadRequest(f"{key} must be between {low} and {high}")
    return number


def cursor() -> int:
    """The resume cursor from ``Last-Event-ID`` or ``?after=N``; 0 means from the start."""
    raw = request.args.get("after")
    if raw is None:
        raw = request.headers.get("Last-Event-ID")
    if raw is None or raw.strip() == "":
        return 0
    raw = raw.strip()
    if not raw.isdigit() or len(raw) > 12:
        raise BadRequest("the cursor (after / Last-Event-ID) must be a non-negative integer")
    return int(raw)


def page_args(default_limit: int = 50, max_limit: int = 200) -> tuple:
    """``limit`` and ``offset`` query arguments, validated."""
    try:
        limit = int(request.args.get("limit", default_limit))
        offset = int(request.args.get("offset", 0))
    except ValueError:
        raise BadRequest("limit and offset must be integers") from None
    if limit < 1 or limit > max_limit or offset < 0:
        raise BadRequest(f"limit must be 1..{max_limit} and offset >= 0")
    return limit, offset
