"""Export a chat as Markdown or JSON, and validate a JSON export for import. No Flask, no SQL.

The JSON export is the import format: ``{"format": "odysseus.chat", "version": 1,
"session": {"title", "created_at", "pinned"?, "archived"?, "folder"?}, "messages": [{"role",
"content", "thinking", "metadata", "created_at", "rating"?, ...}]}``. ``folder`` is the folder's
name (ids mean nothing on another server or to another user). Import is strict: an unknown format or version,
a message of the wrong shape, an unknown role or an over-long text refuses the whole
file, and only display metadata (model label, usage, metrics, outcome) is kept.
"""

from __future__ import annotations

import json
import time
from typing import Any, Dict, List, Optional

from ..errors import BadRequest
from ..store.folders import folder_name
from ..store.ratings import clean_rating

FORMAT = "odysseus.chat"
VERSION = 1
ROLES = ("user", "assistant", "system")
MAX_MESSAGES = 5000
MAX_TITLE = 200
#: fields a message of an export may carry; anything else refuses the import
MESSAGE_FIELDS = {"id", "role", "content", "thinking", "metadata", "created_at", "run_id", "parent_id", "rating"}
#: metadata kept on import: what the page shows about a reply, never run or approval state
KEPT_METADATA = {
    "model_info",
    "usage",
    "metrics",
    "status",
    "stop_reason",
    "stopped",
    "partial",
    "total_time_ms",
    "edited_at",
}


def export_json(session: dict, messages: List[dict], folder: Optional[str] = None) -> Dict[str, Any]:
    """The JSON export of a session and its messages (every stored message of every branch, in order).

    ``parent_id`` links each message to the one it follows; ``session.branch_head`` is the
    newest message of the branch that was shown. ``pinned`` and ``archived`` are written when set,
    and ``folder`` (the name of the session's folder) when it has one.
    """
    return {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": time.time(),
        "session": {
            "id": session["id"],
            "title": session["title"],
            "created_at": session["created_at"],
            "updated_at": session["updated_at"],
            **({"branch_head": session["branch_head"]} if session.get("branch_head") is not None else {}),
            **{flag: True for flag in ("pinned", "archived") if session.get(flag)},
            **({"folder": folder} if folder else {}),
        },
        "messages": [
            {
                "id": m["id"],
                "role": m["role"],
                "content": m.get("content") or "",
                "thinking": m.get("thinking") or "",
                "metadata": m.get("metadata") or {},
                "created_at": m.get("created_at"),
                "run_id": m.get("run_id"),
                **({"parent_id": m["parent_id"]} if m.get("parent_id") is not None else {}),
                **({"rating": _exported_rating(m["rating"])} if m.get("rating") else {}),
            }
            for m in messages
        ],
    }


def _exported_rating(rating: dict) -> Dict[str, Any]:
    """A reply's rating as an export carries it (and an import restores it)."""
    return {"value": rating["value"], "comment": rating.get("comment"), "rated_at": rating.get("rated_at")}


def _rating_line(rating: dict) -> str:
    """The Markdown transcript's line under a rated reply."""
    line = "_Rated " + ("👍 (good)" if rating["value"] == 1 else "👎 (bad)") + "_"
    comment = " ".join((rating.get("comment") or "").split())
    return line + (f" — {comment}" if comment else "")


def _fence(text: str) -> str:
    """A code fence longer than any backtick run in ``text``."""
    longest, run = 0, 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def export_markdown(session: dict, messages: List[dict]) -> str:
    """A readable Markdown transcript: a heading per message, reasoning in a collapsed block."""
    lines = [f"# {' '.join((session.get('title') or 'Chat').split())}", ""]
    names = {"user": "You", "assistant": "Assistant", "system": "System"}
    for message in messages:
        meta = message.get("metadata") or {}
        name = names.get(message["role"], message["role"].title())
        label = (meta.get("model_info") or {}).get("label")
        heading = f"## {name}" + (f" ({label})" if label and message["role"] == "assistant" else "")
        if meta.get("stopped") or meta.get("status") == "stopped":
            heading += " [stopped]"
        elif meta.get("status") in ("error", "interrupted"):
            heading += f" [{meta['status']}]"
        lines += [heading, ""]
        thinking = message.get("thinking") or ""
        if thinking.strip():
            fence = _fence(thinking)
            lines += [
                "<details><summary>Reasoning</summary>",
                "",
                fence + "text",
                thinking,
                fence,
                "",
                "</details>",
                "",
            ]
        lines += [message.get("content") or "", ""]
        if message.get("rating") and message["role"] == "assistant":
            lines += [_rating_line(message["rating"]), ""]
    return "\n".join(lines).rstrip() + "\n"


def _number(value: Any, where: str):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) > 1e12:
        raise BadRequest(f"{where} must be a number")
    return value


def _keep_metadata(raw: Any, where: str) -> dict:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise BadRequest(f"{where}.metadata must be an object")
    kept = {k: v for k, v in raw.items() if k in KEPT_METADATA and v is not None}  # a null usage is no usage
    if len(json.dumps(kept)) > 20_000:
        raise BadRequest(f"{where}.metadata is too large")
    if "model_info" in kept and not isinstance(kept["model_info"], dict):
        raise BadRequest(f"{where}.metadata.model_info must be an object")
    for key in ("usage", "metrics"):
        if key in kept and not isinstance(kept[key], dict):
            raise BadRequest(f"{where}.metadata.{key} must be an object")
    return dict(kept, imported=True)


def parse_import(doc: Any, max_chars: int) -> Dict[str, Any]:
    """The validated title and messages of a JSON export; raises BadRequest naming the first problem."""
    if not isinstance(doc, dict):
        raise BadRequest("an import must be a JSON object (an Odysseus chat export)")
    if doc.get("format") != FORMAT:
        raise BadRequest(f"format must be {FORMAT!r} (export a chat as JSON to get one)")
    if doc.get("version") != VERSION or isinstance(doc.get("version"), bool):
        raise BadRequest(f"unsupported export version {doc.get('version')!r}; this server reads version {VERSION}")
    session = doc.get("session")
    if not isinstance(session, dict):
        raise BadRequest("session must be an object")
    title = session.get("title", "Imported chat")
    if not isinstance(title, str) or not title.strip():
        raise BadRequest("session.title must be a non-empty string")
    title = " ".join(title.split())[:MAX_TITLE]
    messages = doc.get("messages")
    if not isinstance(messages, list):
        raise BadRequest("messages must be a list")
    if not messages:
        raise BadRequest("messages is empty: there is nothing to import")
    if len(messages) > MAX_MESSAGES:
        raise BadRequest(f"an import holds at most {MAX_MESSAGES} messages")
    parsed = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise BadRequest(f"{where} must be an object")
        unknown = sorted(set(message) - MESSAGE_FIELDS)
        if unknown:
            raise BadRequest(f"{where} has unknown field(s): {', '.join(unknown)}")
        role = message.get("role")
        if role not in ROLES:
            raise BadRequest(f"{where}.role must be one of {', '.join(ROLES)}")
        texts = {}
        for key in ("content", "thinking"):
            value = message.get(key, "")
            if value is None:
                value = ""
            if not isinstance(value, str):
                raise BadRequest(f"{where}.{key} must be a string")
            if len(value) > max_chars:
                raise BadRequest(f"{where}.{key} is longer than {max_chars} characters")
            if "\x00" in value:
                raise BadRequest(f"{where}.{key} must not contain NUL characters")
            texts[key] = value
        if role == "user" and not texts["content"].strip():
            raise BadRequest(f"{where}.content must not be empty for a user message")
        _number(message.get("created_at"), f"{where}.created_at")
        parsed.append(
            {
                "role": role,
                "content": texts["content"],
                "thinking": texts["thinking"],
                "metadata": _keep_metadata(message.get("metadata"), where),
                "id": _optional_id(message.get("id"), f"{where}.id"),
                "parent_id": _optional_id(message.get("parent_id"), f"{where}.parent_id"),
                "rating": _imported_rating(message.get("rating"), role, where),
            }
        )
    head = _optional_id(session.get("branch_head"), "session.branch_head")
    return {"title": title, "messages": parsed, "branch_head": head, **_organisation(session)}


def _organisation(session: dict) -> Dict[str, Any]:
    """An export's ``pinned``, ``archived`` (booleans, default false) and ``folder`` (a folder name or null)."""
    kept: Dict[str, Any] = {}
    for flag in ("pinned", "archived"):
        value = session.get(flag, False)
        if not isinstance(value, bool):
            raise BadRequest(f"session.{flag} must be true or false")
        kept[flag] = value
    folder = session.get("folder")
    try:
        kept["folder"] = None if folder is None else folder_name(folder)
    except BadRequest as error:
        raise BadRequest(f"session.folder: {error}") from None
    return kept


def _imported_rating(value: Any, role: str, where: str):
    """An exported reply's rating ``{value, comment?, rated_at?}`` as ``(value, comment, rated_at)``, or None."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BadRequest(f"{where}.rating must be an object or null")
    if role != "assistant":
        raise BadRequest(f"{where}.rating: only an assistant message can carry a rating")
    try:
        rated, comment = clean_rating(value)
    except BadRequest as exc:
        raise BadRequest(f"{where}.rating: {exc.message}") from None
    return rated, comment, _number(value.get("rated_at"), f"{where}.rating.rated_at")


def _optional_id(value: Any, where: str):
    """A message id of the export (links the branches), or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not (1 <= value < 2**63):
        raise BadRequest(f"{where} must be a positive whole number")
    return value
