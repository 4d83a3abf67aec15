"""What a turn asks of the context sources: ``ContextOptions``, parsed once from the request body.

Each field belongs to one source (``attachments``, ``retrieval``, ``web_sources``, ``memories``,
``workspace``); a source reads its field from ``ContextRequest.options`` and never the raw body.
A new source with a new switch adds its field here and one line to ``ContextOptions.parse``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Tuple

from ..errors import BadRequest
from .flags import request_flag

#: the longest workspace path a request may name (context/workspace.py judges it further)
MAX_WORKSPACE_CHARS = 100_000


def attachment_ids(data: Mapping[str, Any], limit: int) -> List[str]:
    """The request's ``attachments`` as a list of distinct ids (JSON list, or a form field holding a JSON
    list or comma-separated ids); BadRequest when malformed."""
    raw = data.get("attachments")
    if raw is None or raw == "" or raw == []:
        return []
    if isinstance(raw, str):
        text = raw.strip()
        if text.startswith("["):
            try:
                raw = json.loads(text)
            except ValueError:
                raise BadRequest("attachments must be a list of upload ids") from None
        else:
            raw = [part.strip() for part in text.split(",") if part.strip()]
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise BadRequest("attachments must be a list of upload ids")
    ids = list(dict.fromkeys(raw))
    if len(ids) > limit:
        raise BadRequest(f"too many attachments: at most {limit} per message")
    return ids


def use_rag_flag(data: Mapping[str, Any]) -> Optional[bool]:
    """``use_rag`` as True/False, or None when unset; BadRequest for anything else."""
    value = data.get("use_rag")
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        return value.lower() in ("1", "true", "yes", "on")
    raise BadRequest("use_rag must be true or false")


def _workspace(data: Mapping[str, Any]) -> Optional[str]:
    value = data.get("workspace")
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise BadRequest("workspace must be a string (an absolute path)")
    if len(value) > MAX_WORKSPACE_CHARS:
        raise BadRequest("workspace is too long")
    return value


@dataclass(frozen=True)
class ContextOptions:
    """The context switches of one turn (None: the source's default)."""

    #: upload ids attached to this message, distinct, in request order (``attachments``)
    attachments: Tuple[str, ...] = ()
    #: retrieval over the user's files: on, off, or None (on when the user has indexed files)
    use_rag: Optional[bool] = None
    #: web search before a chat reply (``web_sources``)
    use_web: Optional[bool] = None
    #: memories in this turn; False also skips automatic extraction after it
    use_memory: Optional[bool] = None
    #: a host directory for an agent turn's tools, as requested (judged inside the run)
    workspace: Optional[str] = None

    @classmethod
    def parse(cls, data: Mapping[str, Any], max_attachments: int) -> "ContextOptions":
        """The options of a request body; BadRequest for malformed values (nothing is looked up)."""
        return cls(
            attachments=tuple(attachment_ids(data, max_attachments)),
            use_rag=use_rag_flag(data),
            use_web=request_flag(data, "use_web"),
            use_memory=request_flag(data, "use_memory"),
            workspace=_workspace(data),
        )
