"""Small helpers of the context sources: the turn body's switches (``use_memory``, ``use_web``), and
``defang`` for untrusted text placed inside a ``<context>`` frame."""

from __future__ import annotations

import re
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


_FRAME_TAG = re.compile(r"<(/?)(context)", re.IGNORECASE)


def defang(text: str) -> str:
    """``text`` with ``<context`` / ``</context`` tags broken up, so it cannot close or open a frame."""
    return _FRAME_TAG.sub(lambda m: f"<{m.group(1)} {m.group(2)}", text)
