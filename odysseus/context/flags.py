"""Reading the context switches of a turn body (``use_memory``, ``use_web``): JSON booleans or form strings."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ..errors import BadRequest

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def request_flag(data: Mapping[str, Any], key: str) -> Optional[bool]:
    """``data[key]`` as True/False, or None when absent; BadRequest for anything else."""
    value = data.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise BadRequest(f"{key} must be true or false")
