"""The four document tools the model gets: create_document, update_document, edit_document, suggest_document.

They are made per turn (``document_tools``) around an ``ActiveDocument``: the request's
``active_doc_id`` (already owner-checked), else the session's active document, and
after a ``create_document`` the document just created. Each accepted call returns its
``doc_update`` / ``doc_suggestions`` event with the result; a refused call (no active
document, over the size limit, no edit applied) raises ``ToolError``, so the model reads
why and no document event is sent. create/update stream a live preview while their
arguments arrive (``Tool.preview``, see ``preview.py``).
"""

from __future__ import annotations

from typing import List, Optional

from ..errors import NotFound, OdysseusError
from ..tools.registry import Tool, ToolContext, ToolError, ToolResult
from .preview import DocumentPreview
from .service import LANGUAGES, Documents, doc_update_event, suggestions_event


class ActiveDocument:
    """Which document this turn's tools act on (see module doc)."""

    def __init__(self, docs: Documents, requested_id: Optional[str] = None):
        self.docs = docs
        self.requested_id = requested_id
        self.created_id: Optional[str] = None

    def get(self, owner: str, session_id: Optional[str]) -> Optional[dict]:
        """The active document now, or None."""
        doc_id = self.created_id or self.requested_id
        if doc_id:
            try:
                return self.docs.repo.get(owner, doc_id)
            except NotFound:  # deleted since: fall back to the session's
                pass
        return self.docs.repo.active_for_session(owner, session_id)

    def require(self, ctx: ToolContext) -> dict:
        """The active document, or a ToolError the model can act on."""
        doc = self.get(ctx.owner, ctx.session_id)
        if doc is None:
            raise ToolError("there is no active document; create one with create_document first")
        return doc


def _refused(exc: OdysseusError) -> ToolError:
    return ToolError(exc.message)


def _lines(text: str) -> int:
    return text.count("\n") + 1 if text else 0


def document_tools(docs: Documents, active: ActiveDocument) -> List[Tool]:
    """The four tools over ``docs``, acting on ``active``."""

    def create(args: dict, ctx: ToolContext) -> ToolResult:
        try:
            doc = docs.create(
                ctx.owner, ctx.session_id, args.get("title"), args.get("language"), args.get("content"), source="ai"
            )
        except OdysseusError as exc:
            raise _refused(exc) from None
        active.created_id = doc["id"]
        return ToolResult(
            f"Created document {doc['title']!r} (id {doc['id']}, {doc['language']}, version 1, "
            f"{_lines(doc['content'])} lines). It is now the active document.",
            events=[doc_update_event(doc)],
            meta={"doc_id": doc["id"]},
        )

    def update(args: dict, ctx: ToolContext) -> ToolResult:
        doc = active.require(ctx)
        try:
            doc, changed = docs.write(ctx.owner, doc["id"], args.get("content"), source="ai")
        except OdysseusError as exc:
            raise _refused(exc) from None
        note = "" if changed else " (the content was unchanged; no new version)"
        return ToolResult(
            f"Updated document {doc['title']!r} to version {doc['version_count']} "
            f"({_lines(doc['content'])} lines){note}.",
            events=[doc_update_event(doc)],
            meta={"doc_id": doc["id"]},
        )

    def edit(args: dict, ctx: ToolContext) -> ToolResult:
        doc = active.require(ctx)
        try:
            edited, applied, skipped = docs.edit(ctx.owner, doc["id"], args.get("edits"))
        except OdysseusError as exc:
            raise _refused(exc) from None
        notes = ("; skipped " + "; ".join(skipped)) if skipped else ""
        if edited is None:
            raise ToolError(f"no edit applied, the document is unchanged{notes}")
        return ToolResult(
            f"Applied {applied} edit{'s' if applied != 1 else ''}, skipped {len(skipped)}{notes}. "
            f"Document {edited['title']!r} is now version {edited['version_count']}.",
            events=[doc_update_event(edited)],
            meta={"doc_id": edited["id"]},
        )

    def suggest(args: dict, ctx: ToolContext) -> ToolResult:
        doc = active.require(ctx)
        try:
            kept, skipped = docs.suggestions(doc, args.get("suggestions"))
        except OdysseusError as exc:
            raise _refused(exc) from None
        notes = ("; skipped " + "; ".join(skipped)) if skipped else ""
        if not kept:
            raise ToolError(f"no usable suggestion{notes}")
        return ToolResult(
            f"Offered {len(kept)} suggestion{'s' if len(kept) != 1 else ''} "
            f"({', '.join(s['id'] for s in kept)}) to the user; the document is unchanged until they "
            f"accept{notes}.",
            events=[suggestions_event(doc, kept)],
            meta={"doc_id": doc["id"]},
        )

    def preview(kind: str):
        def make(ctx: ToolContext) -> DocumentPreview:
            return DocumentPreview(
                kind,
                interval=docs.preview_interval,
                max_chars=docs.max_bytes,
                active=lambda: active.get(ctx.owner, ctx.session_id),
            )

        return make

    edit_item = {
        "type": "object",
        "properties": {"find": {"type": "string"}, "replace": {"type": "string"}},
        "required": ["find", "replace"],
    }
    suggestion = {
        "type": "object",
        "properties": {"find": {"type": "string"}, "replace": {"type": "string"}, "reason": {"type": "string"}},
        "required": ["find", "replace", "reason"],
    }
    return [
        Tool(
            "create_document",
            "Create a new editor document shown beside the chat; it becomes the active "
            "document. Put the whole text in content.",
            {
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "language": {"type": "string", "enum": list(LANGUAGES)},
                    "content": {"type": "string"},
                },
                "required": ["title", "content"],
            },
            create,
            describe=lambda a: f"create_document {str(a.get('title') or '')[:80]!r}",
            preview=preview("create"),
        ),
        Tool(
            "update_document",
            "Replace the whole content of the active document (a new version).",
            {"type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"]},
            update,
            describe=lambda a: f"update_document ({_lines(str(a.get('content') or ''))} lines)",
            preview=preview("update"),
        ),
        Tool(
            "edit_document",
            "Edit the active document: each find text is replaced by its replace text at its "
            "first occurrence. Prefer this for small changes.",
            {"type": "object", "properties": {"edits": {"type": "array", "items": edit_item}}, "required": ["edits"]},
            edit,
            describe=lambda a: f"edit_document ({len(a.get('edits') or [])} edits)",
        ),
        Tool(
            "suggest_document",
            "Propose changes to the active document without writing them; the user accepts or rejects each one.",
            {
                "type": "object",
                "properties": {"suggestions": {"type": "array", "items": suggestion}},
                "required": ["suggestions"],
            },
            suggest,
            describe=lambda a: f"suggest_document ({len(a.get('suggestions') or [])} suggestions)",
        ),
    ]
