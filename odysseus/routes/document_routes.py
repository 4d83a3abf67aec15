"""Editor documents over REST: create, list per session, read, save, rename, delete, versions, restore.

Every route is owner-scoped: another user's document or session answers 404. A user
save (``PUT``) is a no-op when the content is unchanged and folds into the user's own
previous version when that one is under ``DOCUMENT_FOLD_SECONDS`` old.
"""

from __future__ import annotations

from flask import Blueprint, Flask, current_app, jsonify

from ..documents.service import Documents, clean_title, normalise_language, public
from ..errors import BadRequest
from .auth import current_owner
from .params import body, optional_str

bp = Blueprint("documents", __name__)
#: version numbers in URLs: a huge number is an unknown version (404), not an SQLite overflow
VERSION = "<int(max=1000000000):number>"


def docs() -> Documents:
    """This app's document operations."""
    return current_app.extensions["odysseus.documents"]


def _store():
    return current_app.extensions["odysseus.store"]


@bp.post("/api/document")
def create_document():
    """Create a document (version 1, source user), in a session when ``session_id`` names one."""
    owner = current_owner()
    data = body()
    session_id = optional_str(data, "session_id", 200)
    if session_id:
        _store().sessions.get(owner, session_id)
    language = data.get("language")
    if language is not None and not isinstance(language, str):
        raise BadRequest("language must be a string")
    content = data.get("content", "")
    doc = docs().create(owner, session_id, data.get("title"), language, content, source="user")
    return jsonify(public(doc)), 201


@bp.get("/api/documents/<session_id>")
def list_documents(session_id: str):
    """The session's documents without content, most recently updated first."""
    owner = current_owner()
    _store().sessions.get(owner, session_id)
    rows = docs().repo.list_for_session(owner, session_id)
    return jsonify(
        {
            "session_id": session_id,
            "documents": [
                {
                    **{k: r[k] for k in ("id", "session_id", "title", "language", "created_at", "updated_at", "size")},
                    "version": r["version_count"],
                    "active": bool(r["active"]),
                }
                for r in rows
            ],
        }
    )


@bp.get("/api/document/<doc_id>")
def get_document(doc_id: str):
    """One document with its current content."""
    return jsonify(public(docs().repo.get(current_owner(), doc_id)))


@bp.put("/api/document/<doc_id>")
def save_document(doc_id: str):
    """Save the user's content: a new version (source user), a fold into a recent one, or nothing."""
    owner = current_owner()
    data = body()
    if "content" not in data:
        raise BadRequest("content is required")
    doc, changed = docs().write(owner, doc_id, data["content"], source="user", summary=data.get("summary"))
    return jsonify({**public(doc), "changed": changed})


@bp.patch("/api/document/<doc_id>")
def patch_document(doc_id: str):
    """Rename the document and/or change its language."""
    owner = current_owner()
    data = body()
    title = clean_title(data["title"]) if data.get("title") is not None else None
    language = data.get("language")
    if language is not None and not isinstance(language, str):
        raise BadRequest("language must be a string")
    doc = docs().repo.patch(
        owner, doc_id, title=title, language=normalise_language(language) if language is not None else None
    )
    return jsonify(public(doc))


@bp.delete("/api/document/<doc_id>")
def delete_document(doc_id: str):
    """Delete the document and all its versions."""
    docs().repo.delete(current_owner(), doc_id)
    return jsonify({"deleted": True})


@bp.get("/api/document/<doc_id>/versions")
def list_versions(doc_id: str):
    """The document's versions, newest first (no content)."""
    return jsonify({"doc_id": doc_id, "versions": docs().repo.versions(current_owner(), doc_id)})


@bp.get(f"/api/document/<doc_id>/version/{VERSION}")
def get_version(doc_id: str, number: int):
    """One version with its content."""
    return jsonify(docs().repo.version(current_owner(), doc_id, number))


@bp.post(f"/api/document/<doc_id>/restore/{VERSION}")
def restore_version(doc_id: str, number: int):
    """Add a new version with version ``number``'s content ("Restored from vN")."""
    return jsonify(public(docs().restore(current_owner(), doc_id, number)))


def init_app(app: Flask) -> None:
    """The document operations, their routes, and clean-up when a session is deleted."""
    documents = app.extensions["odysseus.documents"] = Documents(app.extensions["odysseus.store"].documents, app.config)
    app.extensions["odysseus.runs"].hooks.session_deleted.connect(documents.forget_session)
    app.register_blueprint(bp)
