"""Reading request input: bodies (JSON or form), cursors and simple typed fields.

Every number read from a request is ASCII digits within stated bounds (``str.isdigit``,
``int`` and ``float`` all accept other Unicode digits such as ``²`` or ``٣``); every JSON
body is at most ``MAX_JSON_DEPTH`` deep and holds no lone UTF-16 surrogate, which could
never be stored or sent as UTF-8. Anything else is a ``BadRequest`` (400).
"""

from __future__ import annotations

import re
from typing import Any, Optional

from flask import request
from werkzeug.routing import BaseConverter, ValidationError

from ..errors import BadRequest
from ..llm.text_repair import has_surrogate
from ..validation import optional_float as optional_float  # re-exported for the routes
from ..validation import optional_str as optional_str

MAX_JSON_DEPTH = 64  # arrays/objects inside each other; deeper bodies are refused
MAX_CURSOR = 2**53 - 1  # event ids stay exact in JavaScript numbers
MAX_OFFSET = 1_000_000_000
MAX_ROW_ID = 9223372036854775807  # SQLite's largest integer
_DIGITS = re.compile(r"[0-9]{1,19}")


def check_json(value: Any) -> None:
    """Refuse JSON nested deeper than ``MAX_JSON_DEPTH`` or with a lone surrogate in any string or key.

    Iterative, so a hostile depth cannot exhaust the stack here. ``json.loads`` joins an
    escaped pair into one character, so any surrogate left in a decoded string is lone.
    """
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if has_surrogate(item):
                raise BadRequest("text must be valid Unicode: a lone UTF-16 surrogate (\\ud800-\\udfff) was sent")
            continue
        if isinstance(item, (dict, list)):
            if depth >= MAX_JSON_DEPTH:
                raise BadRequest(f"JSON body is nested deeper than {MAX_JSON_DEPTH} levels")
            children = list(item.keys()) + list(item.values()) if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)


def _json_body() -> Any:
    """The parsed JSON body, checked; None when it is not valid JSON."""
    try:
        data = request.get_json(silent=True)
    except RecursionError:  # json.loads gives up past ~1000 levels: same answer as our own limit
        raise BadRequest(f"JSON body is nested deeper than {MAX_JSON_DEPTH} levels") from None
    if data is not None:
        check_json(data)
    return data


def body() -> dict:
    """The request body as a dict: JSON when sent as JSON, else form fields."""
    if request.is_json or (request.mimetype or "").endswith("+json"):
        data = _json_body()
        if data is None:
            raise BadRequest("malformed JSON body")
        if not isinstance(data, dict):
            raise BadRequest("JSON body must be an object")
        return data
    if request.form:
        data = request.form.to_dict()
        check_json(data)
        return data
    raw = request.get_data(cache=True)
    if raw.strip():
        raise BadRequest("send a JSON object (Content-Type: application/json) or form fields")
    return {}


def json_or_empty() -> dict:
    """A JSON object body when one was sent, else ``{}`` (for routes whose body is optional)."""
    data = _json_body() if request.get_data(cache=True).strip() else None
    return data if isinstance(data, dict) else {}


def ascii_int(raw: Any, name: str, low: int, high: int) -> int:
    """``raw`` (text from a query, header or form) as an int in [low, high]: ASCII digits only."""
    if not isinstance(raw, str) or not _DIGITS.fullmatch(raw):
        raise BadRequest(f"{name} must be a whole number written with the digits 0-9")
    value = int(raw)
    if not (low <= value <= high):
        raise BadRequest(f"{name} must be between {low} and {high}")
    return value


def cursor() -> int:
    """The resume cursor: ``Last-Event-ID`` when sent, else ``?after=N``; 0 means from the start.

    The header wins: ``EventSource`` keeps the URL it was opened with (``?after=0``) and
    sends the newer cursor in the header on every reconnect.
    """
    raw = request.headers.get("Last-Event-ID")
    raw = None if raw is None else raw.strip(" \t")  # optional whitespace around a header value
    if raw is None or raw == "":
        raw = request.args.get("after")
    if raw is None or raw == "":
        return 0
    if not _DIGITS.fullmatch(raw) or int(raw) > MAX_CURSOR:
        raise BadRequest(
            f"the cursor (after / Last-Event-ID) must be a non-negative integer (digits 0-9, at most {MAX_CURSOR})"
        )
    return int(raw)


def page_args(default_limit: int = 50, max_limit: int = 200) -> tuple:
    """``limit`` and ``offset`` query arguments, validated."""
    limit = ascii_int(request.args.get("limit", str(default_limit)), "limit", 1, max_limit)
    offset = ascii_int(request.args.get("offset", "0"), "offset", 0, MAX_OFFSET)
    return limit, offset


def optional_query_int(name: str, low: int, high: int) -> Optional[int]:
    """An optional integer query argument (ASCII digits, within bounds); None when absent or empty."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        return None
    return ascii_int(raw, name, low, high)


class AsciiIntConverter(BaseConverter):
    """``<digits:name>`` in a URL: ASCII digits only (Flask's ``int`` also matches ``٣``), up to SQLite's maximum."""

    regex = r"[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        number = int(value)
        if number > MAX_ROW_ID:
            raise ValidationError()  # no such row: the route does not match (404)
        return number

    def to_url(self, value: Any) -> str:
        return str(int(value))
