"""Search across the caller's chats, export a chat (Markdown or JSON) and import a JSON export."""

from __future__ import annotations

import json
import re

from flask import Blueprint, current_app, jsonify, request

from ..chats.transfer import export_json, export_markdown, parse_import
from ..errors import BadRequest
from ..store.imports import import_chat
from .auth import current_owner
from .params import body, page_args

bp = Blueprint("chats", __name__)
MAX_QUERY = 500


def _store():
    return current_app.extensions["odysseus.store"]


@bp.get("/api/search")
def search():
    """Messages of the caller's chats that contain every word of ``q`` (prefixes match), best first."""
    query = request.args.get("q", "")
    if not query.strip():
        raise BadRequest("q is required")
    if len(query) > MAX_QUERY:
        raise BadRequest(f"q is longer than {MAX_QUERY} characters")
    limit, offset = page_args(30, 100)
    return jsonify({"query": query, "results": _store().search.search(current_owner(), query, limit, offset)})


def _filename(title: str, extension: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", title).strip("-._")[:60] or "chat"
    return f"{stem}.{extension}"


@bp.get("/api/sessions/<session_id>/export")
def export(session_id: str):
    """The session as a download: ``format=md`` (a readable transcript) or ``format=json`` (importable)."""
    owner = current_owner()
    kind = request.args.get("format", "json")
    if kind not in ("md", "json"):
        raise BadRequest("format must be md or json")
    store = _store()
    session = store.sessions.get(owner, session_id)
    messages = store.messages.list(owner, session_id, limit=100_000)
    if kind == "md":
        data, mimetype = export_markdown(session, messages), "text/markdown; charset=utf-8"
    else:
        folder = store.folders.get(owner, session["folder_id"])["name"] if session.get("folder_id") else None
        data = json.dumps(export_json(session, messages, folder), ensure_ascii=False, indent=1)
        mimetype = "application/json"
    response = current_app.response_class(data, mimetype=mimetype)
    response.headers["Content-Disposition"] = f'attachment; filename="{_filename(session["title"], kind)}"'
    response.headers["Cache-Control"] = "no-store"
    return response


@bp.post("/api/sessions/import")
def import_session():
    """Create a new session from a JSON export; a bad file is refused whole and stores nothing."""
    owner = current_owner()
    parsed = parse_import(body(), int(current_app.config["MAX_MESSAGE_CHARS"]))
    session = import_chat(
        _store().locked,
        owner,
        parsed["title"],
        parsed["messages"],
        parsed.get("branch_head"),
        pinned=parsed["pinned"],
        archived=parsed["archived"],
        folder=parsed["folder"],
    )
    return jsonify(dict(session, message_count=len(parsed["messages"]))), 201
