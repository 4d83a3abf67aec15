"""Operations on what a user keeps: memories, research jobs, editor documents and uploads."""

from __future__ import annotations

from typing import List

from .schemas import BOOL, DOC_VERSION, ID, INT, MEMORY, MEMORY_SETTINGS, Op, PAGE, RESEARCH, STR, UPLOAD_BODY, WORKFLOW

CONTENT_OPERATIONS: List[Op] = [
    # memories
    Op("GET", "/api/memory", "The caller's memories (pinned first) and memory switches.", "memory"),
    Op("POST", "/api/memory", "Remember a fact.", "memory", MEMORY, ("text",), status=201),
    Op(
        "GET",
        "/api/memory/search",
        "Full-text search over the caller's memories.",
        "memory",
        query=(("q", {"type": "string", "minLength": 1, "maxLength": 500}),),
    ),
    Op("GET", "/api/memory/settings", "The caller's memory switches.", "memory"),
    Op(
        "PATCH",
        "/api/memory/settings",
        "Turn memories in context or automatic extraction on or off.",
        "memory",
        MEMORY_SETTINGS,
    ),
    Op("GET", "/api/memory/<memory_id>", "One memory.", "memory"),
    Op("PATCH", "/api/memory/<memory_id>", "Change a memory's text, category or pinned flag.", "memory", MEMORY),
    Op(
        "POST",
        "/api/memory/<memory_id>/pin",
        "Pin (or, with pinned false, unpin) a memory.",
        "memory",
        {"pinned": BOOL},
    ),
    Op("DELETE", "/api/memory/<memory_id>", "Forget a memory.", "memory"),
    Op(
        "GET",
        "/api/workspace/browse",
        "Directories under a path, for the workspace picker (admin).",
        "agent",
        query=(("path", {"type": "string", "maxLength": 4096}),),
    ),
    # research jobs (docs/guide.md "Research"; docs/protocol.md "Research jobs")
    Op(
        "POST",
        "/api/research/start",
        "Start a research job; answers at once with its id.",
        "research",
        RESEARCH,
        ("query",),
        status=202,
    ),
    Op(
        "GET",
        "/api/research/stream/<job_id>",
        "The job's stream: progress frames, then its final status.",
        "research",
        query=(("after", INT),),
        headers=(("Last-Event-ID", STR),),
        stream=True,
    ),
    Op("GET", "/api/research/status/<job_id>", "Where a job is: status, phase, counts.", "research"),
    Op("POST", "/api/research/cancel/<job_id>", "Cancel a job (idempotent).", "research"),
    Op("GET", "/api/research/<job_id>", "A job's result: report, sources, findings, stats.", "research"),
    Op("GET", "/api/research", "The caller's jobs, newest first.", "research", query=(("q", STR),) + PAGE),
    Op("DELETE", "/api/research/<job_id>", "Forget a job (cancels it when running).", "research"),
    Op("GET", "/api/alloy/workflows", "The caller's Agent Alloy workflows.", "agent"),
    Op(
        "POST",
        "/api/alloy/workflows",
        "Create a workflow (a supervisor agent and its specialists).",
        "agent",
        WORKFLOW,
        ("name", "members"),
        status=201,
    ),
    Op("GET", "/api/alloy/workflows/<workflow_id>", "One workflow.", "agent"),
    Op("PATCH", "/api/alloy/workflows/<workflow_id>", "Change a workflow.", "agent", WORKFLOW),
    Op("DELETE", "/api/alloy/workflows/<workflow_id>", "Delete a workflow.", "agent"),
    # editor documents
    Op(
        "POST",
        "/api/document",
        "Create a document (in a session when session_id names one).",
        "documents",
        {
            "session_id": ID,
            "title": {"type": "string", "minLength": 1, "maxLength": 200},
            "language": STR,
            "content": STR,
        },
        ("title",),
        status=201,
    ),
    Op("GET", "/api/documents/<session_id>", "The session's documents (no content).", "documents"),
    Op("GET", "/api/document/<doc_id>", "One document with its content.", "documents"),
    Op(
        "PUT",
        "/api/document/<doc_id>",
        "Save the content (new user version; no-op when unchanged).",
        "documents",
        {"content": STR, "summary": STR},
        ("content",),
    ),
    Op(
        "PATCH",
        "/api/document/<doc_id>",
        "Rename a document or change its language.",
        "documents",
        {"title": {"type": "string", "minLength": 1, "maxLength": 200}, "language": STR},
    ),
    Op("DELETE", "/api/document/<doc_id>", "Delete a document and its versions.", "documents"),
    Op("GET", "/api/document/<doc_id>/versions", "The document's versions, newest first.", "documents"),
    Op("GET", f"/api/document/<doc_id>/version/{DOC_VERSION}", "One version with its content.", "documents"),
    Op("POST", f"/api/document/<doc_id>/restore/{DOC_VERSION}", "Restore a version as a new version.", "documents"),
    # uploads (docs/guide.md "Uploads, attachments and retrieval")
    Op(
        "POST",
        "/api/upload",
        "Upload files (multipart field files); same bytes give the existing record.",
        "uploads",
        extra={"requestBody": UPLOAD_BODY},
    ),
    Op("GET", "/api/upload", "The caller's uploads, newest first.", "uploads", query=PAGE),
    Op("GET", "/api/upload/<upload_id>", "One upload's record, with its index status.", "uploads"),
    Op(
        "GET",
        "/api/upload/<upload_id>/content",
        "An upload's bytes (images inline, other files as downloads).",
        "uploads",
    ),
    Op("DELETE", "/api/upload/<upload_id>", "Delete an upload with its file and indexed chunks.", "uploads"),
]
