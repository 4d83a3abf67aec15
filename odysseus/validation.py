"""Typed fields of a request body, validated without Flask: strings and numbers within bounds.

``routes/params.py`` reads the HTTP request; the turn parser (``turns/parse.py``) and the
background job runner read plain dicts. Both use these, so a field is refused with the same
message whichever way it arrived. Anything malformed is a ``BadRequest`` (400).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Optional

from .errors import BadRequest

_DECIMAL = re.compile(r"-?[0-9]{1,15}(?:\.[0-9]{1,15})?")


def optional_str(data: Mapping[str, Any], key: str, max_len: int = 500) -> Optional[str]:
    """A string field or None; rejects other types and over-long values."""
    value = data.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{key} must be a string")
    if len(value) > max_len:
        raise BadRequest(f"{key} is longer than {max_len} characters")
    return value


def optional_float(data: Mapping[str, Any], key: str, low: float, high: float) -> Optional[float]:
    """A number field within [low, high] or None (form strings are parsed)."""
    value: Any = data.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, bool) or (isinstance(value, str) and not _DECIMAL.fullmatch(value)):
        raise BadRequest(f"{key} must be a number")  # form strings: ASCII decimals only, no "nan" or "١"
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise BadRequest(f"{key} must be a number") from None
    if not (low <= number <= high):
        raise BadRequest(f"{key} must be between {low} and {high}")
    return number


def flag(value: Any) -> bool:
    """A lenient switch: True for ``true`` and the strings "1", "true", "yes" (any case); else False."""
    return value is True or (isinstance(value, str) and value.lower() in ("1", "true", "yes"))
