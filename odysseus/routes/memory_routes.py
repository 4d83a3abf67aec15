"""Memories (the caller's own only) and the memory switches; the admin's workspace picker."""

from __future__ import annotations

import os

from flask import Blueprint, current_app, jsonify, request

from ..context.memories import settings_changes
from ..context.workspace import browse, database_file, may_choose
from ..errors import BadRequest, Forbidden, NotFound
from ..store.memories import clean_memory
from .auth import current_owner
from .params import body
from .parts import ext

bp = Blueprint("memories", __name__)
MAX_QUERY = 500


def _memories():
    return ext("store").memories


@bp.get("/api/memory")
def list_memories():
    """The caller's memories (pinned first) and their memory switches."""
    owner = current_owner()
    return jsonify({"memories": _memories().list(owner), "settings": _memories().settings(owner)})


@bp.post("/api/memory")
def create_memory():
    """Remember a fact: ``text`` (required), ``category``, ``pinned``."""
    owner = current_owner()
    fields = clean_memory(body(), partial=False)
    memory = _memories().add(owner, fields, source="user", limit=int(current_app.config["MEMORY_MAX_PER_USER"]))
    return jsonify(memory), 201


@bp.get("/api/memory/search")
def search_memories():
    """Full-text search over the caller's memories (``q``)."""
    query = request.args.get("q", "")
    if not query.strip():
        raise BadRequest("q is required")
    if len(query) > MAX_QUERY:
        raise BadRequest(f"q is longer than {MAX_QUERY} characters")
    return jsonify({"memories": _memories().search(current_owner(), query)})


@bp.get("/api/memory/settings")
def memory_settings():
    """The caller's memory switches: ``enabled`` (memories in context), ``auto_extract``."""
    return jsonify(_memories().settings(current_owner()))


@bp.patch("/api/memory/settings")
def change_memory_settings():
    """Turn memory in context, or automatic extraction, on or off."""
    owner = current_owner()
    return jsonify(_memories().set_settings(owner, settings_changes(body())))


@bp.get("/api/memory/<memory_id>")
def get_memory(memory_id: str):
    """One memory."""
    return jsonify(_memories().get(current_owner(), memory_id))


@bp.patch("/api/memory/<memory_id>")
def update_memory(memory_id: str):
    """Change a memory's text, category or pinned flag."""
    owner = current_owner()
    _memories().get(owner, memory_id)  # 404 before validating a foreign id's body
    return jsonify(_memories().update(owner, memory_id, clean_memory(body(), partial=True)))


@bp.post("/api/memory/<memory_id>/pin")
def pin_memory(memory_id: str):
    """Pin (``pinned``: true, the default) or unpin a memory."""
    owner = current_owner()
    _memories().get(owner, memory_id)
    data = body()
    pinned = data.get("pinned", True)
    if not isinstance(pinned, bool):
        raise BadRequest("pinned must be true or false")
    return jsonify(_memories().update(owner, memory_id, {"pinned": 1 if pinned else 0}))


@bp.delete("/api/memory/<memory_id>")
def delete_memory(memory_id: str):
    """Forget a memory."""
    _memories().delete(current_owner(), memory_id)
    return jsonify({"deleted": True})


@bp.get("/api/workspace/browse")
def browse_workspace():
    """Directories under ``path`` (default: the server user's home) for the workspace picker (admin)."""
    owner = current_owner()
    if not may_choose(ext("store"), current_app.config, owner):
        raise Forbidden("only an admin can choose a workspace")
    path = request.args.get("path") or os.path.expanduser("~")
    if len(path) > 4096 or "\x00" in path or not os.path.isabs(path):
        raise BadRequest("path must be an absolute directory path")
    if not os.path.isdir(path):
        raise NotFound("no such directory")
    try:
        config = current_app.config
        listing = browse(path, config["DATA_DIR"], int(config["WORKSPACE_BROWSE_LIMIT"]), database_file(config))
    except PermissionError:
        raise Forbidden("the server may not read that directory") from None
    except OSError as exc:
        raise BadRequest(f"cannot list that directory ({exc.strerror or type(exc).__name__})") from None
    return jsonify(listing)
