"""Chat folders over HTTP: ``/api/folders`` (the caller's own only; issue 36).

A session is moved with ``PATCH /api/sessions/{id}`` (``folder_id``; history_routes.py). Names are
validated in ``store/folders.py``; another user's folder id answers 404 exactly like an unknown one.
"""

from __future__ import annotations

from flask import Blueprint, jsonify

from ..errors import BadRequest
from .auth import current_owner
from .params import body
from .parts import ext

bp = Blueprint("folders", __name__)


def _name() -> object:
    data = body()
    if "name" not in data:
        raise BadRequest("name is required")
    return data["name"]


@bp.get("/api/folders")
def list_folders():
    """The caller's folders by name, each with its ``session_count`` (chats that are not archived)."""
    return jsonify({"folders": ext("store").folders.list(current_owner())})


@bp.post("/api/folders")
def create_folder():
    """Create a folder (``name``: trimmed, 1-100 characters, unique in any case: 409 otherwise)."""
    return jsonify(ext("store").folders.create(current_owner(), _name())), 201


@bp.patch("/api/folders/<folder_id>")
def rename_folder(folder_id: str):
    """Rename a folder."""
    owner = current_owner()
    ext("store").folders.get(owner, folder_id)  # 404 before any body validation
    return jsonify(ext("store").folders.rename(owner, folder_id, _name()))


@bp.delete("/api/folders/<folder_id>")
def delete_folder(folder_id: str):
    """Delete a folder; its chats stay, in no folder (``sessions_moved`` says how many)."""
    moved = ext("store").folders.delete(current_owner(), folder_id)
    return jsonify({"deleted": True, "sessions_moved": moved})
