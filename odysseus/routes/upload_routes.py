"""/api/upload: upload files, read their records and bytes, delete them (owner only; others' ids are 404).

``init_app`` also wires the uploads part: the upload service and its background indexer,
the optional embedder, and the ``attachments`` and ``retrieval`` context sources (registered
first, so ``attachments`` is the first event of a turn).
"""

from __future__ import annotations

from flask import Blueprint, Flask, current_app, jsonify, request, send_file
from werkzeug.exceptions import RequestEntityTooLarge

from ..context import pipeline_of
from ..context.attachments import AttachmentSource
from ..context.embeddings import embedder_from_config
from ..context.retrieval import Retriever, RetrievalSource
from ..context.uploads import Incoming, UploadService, valid_id
from ..errors import NotFound, PayloadTooLarge
from ..store.uploads import public_upload
from .auth import current_owner
from .params import page_args

bp = Blueprint("uploads", __name__)
FORM_SLACK = 1024 * 1024  # multipart boundaries and headers on top of the files themselves


def _service() -> UploadService:
    return current_app.extensions["odysseus.uploads"]


def _row(upload_id: str) -> dict:
    if not valid_id(upload_id):
        raise NotFound("upload not found")
    return _service().store.uploads.get(current_owner(), upload_id)


@bp.post("/api/upload")
def upload():
    """Store the multipart field ``files`` (several at once); answer ``{files: [record + is_duplicate]}``."""
    owner = current_owner()
    service = _service()
    request.max_content_length = service.max_files * service.max_bytes + FORM_SLACK
    try:
        storages = request.files.getlist("files")
    except RequestEntityTooLarge:
        raise PayloadTooLarge(
            f"upload too large: at most {service.max_files} files of {service.max_bytes} bytes each"
        ) from None
    if len(storages) > service.max_files:  # before reading them
        raise PayloadTooLarge(f"too many files: at most {service.max_files} per upload")
    files = [Incoming(storage.filename, storage.stream.read(service.max_bytes + 1)) for storage in storages]
    return jsonify({"files": service.accept(owner, files)})


@bp.get("/api/upload")
def list_uploads():
    """The caller's uploads, newest first, with their index status."""
    limit, offset = page_args(100, 500)
    rows = _service().store.uploads.list(current_owner(), limit, offset)
    return jsonify({"files": [public_upload(row) for row in rows]})


@bp.get("/api/upload/<upload_id>")
def get_upload(upload_id: str):
    """One upload's record (``index_status``: pending, indexing, indexed, failed, or none for images)."""
    return jsonify(public_upload(_row(upload_id)))


@bp.get("/api/upload/<upload_id>/content")
def upload_content(upload_id: str):
    """The stored bytes: images inline (previews), everything else as a download of plain bytes."""
    row = _row(upload_id)
    image = row["kind"] == "image"
    mime = row["mime"] if image or row["kind"] == "pdf" else "text/plain; charset=utf-8"
    response = send_file(
        _service().path(upload_id), mimetype=mime, as_attachment=not image, download_name=row["name"], max_age=3600
    )
    response.headers["Cache-Control"] = "private, max-age=3600"
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Content-Security-Policy"] = "sandbox; default-src 'none'"
    return response


@bp.delete("/api/upload/<upload_id>")
def delete_upload(upload_id: str):
    """Delete the upload, its file and its indexed chunks."""
    _row(upload_id)
    _service().delete(current_owner(), upload_id)
    return jsonify({"deleted": True, "id": upload_id})


def init_app(app: Flask) -> None:
    """Build the upload service and indexer, register the context sources and the blueprint."""
    store, config = app.extensions["odysseus.store"], app.config
    embedder = embedder_from_config(config)
    service = app.extensions["odysseus.uploads"] = UploadService(store, config, embedder=embedder)
    router = app.extensions["odysseus.router"]
    pipeline = pipeline_of(app.extensions)
    pipeline.add(AttachmentSource(service, config, router.resolve))
    pipeline.add(RetrievalSource(Retriever(store, config, embedder), config))
    service.indexer.resume_unfinished()
    app.register_blueprint(bp)
