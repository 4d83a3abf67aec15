"""Migrations m001-m112: the tables every part stands on (sessions, messages, runs, accounts, agents,
jobs, durable runs, documents, uploads, memories, research, workflows, search, settings).

Registered in file order by ``migration`` (odysseus/store/migrations.py, which runs them). Never edit
one that has shipped; add a new one at the end of ``migrations_since_120``."""

from __future__ import annotations

from sqlite_utils import Database

from .migrations import migration


@migration
def m001_initial(db: Database) -> None:
    """Sessions, messages and runs, each with an owner."""
    db.table("sessions").create(
        {
            "id": str,
            "owner": str,
            "title": str,
            "created_at": float,
            "updated_at": float,
        },
        pk="id",
    )
    db.table("sessions").create_index(["owner", "updated_at"])
    db.table("messages").create(
        {
            "id": int,
            "session_id": str,
            "owner": str,
            "role": str,
            "content": str,
            "thinking": str,
            "metadata": str,
            "run_id": str,
            "client_message_id": str,
            "created_at": float,
        },
        pk="id",
        not_null={"session_id", "owner", "role"},
    )
    db.table("messages").create_index(["session_id", "id"])
    db.table("messages").create_index(["session_id", "client_message_id"])
    db.table("runs").create(
        {
            "run_id": str,
            "session_id": str,
            "owner": str,
            "mode": str,
            "model": str,
            "status": str,
            "stop_reason": str,
            "created_at": float,
            "updated_at": float,
            "finished_at": float,
            "event_count": int,
            "last_event_type": str,
            "error": str,
            "partial_content": str,
            "partial_thinking": str,
            "message_id": int,
            "user_message_id": int,
            "client_message_id": str,
            "detached": int,
        },
        pk="run_id",
        not_null={"session_id", "owner", "status"},
    )
    db.table("runs").create_index(["session_id", "created_at"])
    db.table("runs").create_index(["owner", "created_at"])
    db.table("runs").create_index(["status"])


@migration
def m002_accounts(db: Database) -> None:
    """Users, their API tokens (hashed) and instance settings such as open sign-up."""
    db.table("users").create(
        {
            "id": str,
            "username": str,
            "password_hash": str,
            "is_admin": int,
            "created_at": float,
            "password_changed_at": float,
            "session_version": int,
        },
        pk="id",
        not_null={"username", "password_hash"},
    )
    db.table("users").create_index(["username"], unique=True)
    db.table("api_tokens").create(
        {
            "id": str,
            "owner": str,
            "name": str,
            "token_hash": str,
            "prefix": str,
            "created_at": float,
            "last_used_at": float,
            "revoked_at": float,
        },
        pk="id",
        not_null={"owner", "token_hash"},
    )
    db.table("api_tokens").create_index(["token_hash"], unique=True)
    db.table("api_tokens").create_index(["owner", "created_at"])
    db.table("settings").create({"key": str, "value": str}, pk="key")


@migration
def m003_agent(db: Database) -> None:
    """Agent mode: tool approvals (single-use, bound to owner, session and call) and generated images."""
    db.table("approvals").create(
        {
            "id": str,
            "owner": str,
            "session_id": str,
            "run_id": str,
            "call": str,
            "call_hash": str,
            "created_at": float,
            "expires_at": float,
            "used_at": float,
            "decision": str,
            "state": str,
        },
        pk="id",
        not_null={"owner", "session_id", "call", "call_hash", "expires_at"},
    )
    db.table("approvals").create_index(["owner", "session_id"])
    db.table("images").create(
        {
            "name": str,
            "owner": str,
            "session_id": str,
            "mime": str,
            "size": int,
            "created_at": float,
        },
        pk="name",
        not_null={"owner", "mime"},
    )
    db.table("images").create_index(["owner"])


@migration
def m004_agent_api(db: Database) -> None:
    """Background jobs, agent profiles and named agents, each with an owner."""
    db.table("jobs").create(
        {
            "job_id": str,
            "owner": str,
            "session_id": str,
            "request": str,
            "status": str,
            "run_id": str,
            "message_id": int,
            "result": str,
            "error": str,
            "attempts": int,
            "created_at": float,
            "updated_at": float,
            "finished_at": float,
        },
        pk="job_id",
        not_null={"owner", "status"},
    )
    db.table("jobs").create_index(["owner", "created_at"])
    db.table("jobs").create_index(["status"])
    db.table("agent_profiles").create(
        {
            "id": str,
            "owner": str,
            "name": str,
            "system_prompt": str,
            "model": str,
            "tools": str,
            "temperature": float,
            "is_default": int,
            "created_at": float,
            "updated_at": float,
        },
        pk="id",
        not_null={"owner", "name"},
    )
    db.table("agent_profiles").create_index(["owner"])
    db.table("agents").create(
        {
            "agent_id": str,
            "owner": str,
            "name": str,
            "profile_id": str,
            "system_prompt": str,
            "model": str,
            "tools": str,
            "temperature": float,
            "created_at": float,
            "updated_at": float,
        },
        pk=("owner", "agent_id"),
        not_null={"owner", "agent_id"},
    )


@migration
def m005_durable_runs(db: Database) -> None:
    """The durable run log (every logged event, exactly as sent) and run/job ownership leases."""
    db.table("run_events").create(
        {"run_id": str, "seq": int, "type": str, "payload": str},
        pk=("run_id", "seq"),
        not_null={"run_id", "seq", "type", "payload"},
    )
    for column, kind in (
        ("worker", str),
        ("lease_until", float),
        ("first_seq", int),
        ("terminal_type", str),
        ("events_purged", int),
    ):
        db.table("runs").add_column(column, kind)
    db.table("runs").create_index(["status", "lease_until"])
    db.table("runs").create_index(["events_purged", "finished_at"])
    for column, kind in (("worker", str), ("lease_until", float)):
        db.table("jobs").add_column(column, kind)


@migration
def m106_documents(db: Database) -> None:
    """Editor documents (owner-scoped, optionally in a session) and their numbered versions."""
    db.table("documents").create(
        {
            "id": str,
            "owner": str,
            "session_id": str,
            "title": str,
            "language": str,
            "content": str,
            "version_count": int,
            "active": int,
            "created_at": float,
            "updated_at": float,
        },
        pk="id",
        not_null={"owner", "title", "language", "content"},
    )
    db.table("documents").create_index(["owner", "session_id", "updated_at"])
    db.table("document_versions").create(
        {
            "document_id": str,
            "version": int,
            "content": str,
            "summary": str,
            "source": str,
            "created_at": float,
        },
        pk=("document_id", "version"),
        not_null={"document_id", "version", "content", "source"},
    )


@migration
def m107_uploads(db: Database) -> None:
    """Uploaded files (per owner, deduplicated by sha256), their text chunks and the FTS5 index over them."""
    db.table("uploads").create(
        {
            "id": str,
            "owner": str,
            "name": str,
            "mime": str,
            "kind": str,
            "size": int,
            "sha256": str,
            "width": int,
            "height": int,
            "uploaded_at": float,
            "index_status": str,
            "index_error": str,
            "chunk_count": int,
            "indexed_at": float,
        },
        pk="id",
        not_null={"owner", "name", "mime", "kind", "size", "sha256"},
    )
    db.table("uploads").create_index(["owner", "sha256"])  # not unique: adopting single-user rows must never fail
    db.table("uploads").create_index(["index_status"])
    db.table("upload_chunks").create(
        {
            "id": int,
            "upload_id": str,
            "owner": str,
            "chunk": int,
            "text": str,
            "vector": bytes,
        },
        pk="id",
        not_null={"upload_id", "owner", "chunk", "text"},
    )
    db.table("upload_chunks").create_index(["upload_id", "chunk"])
    db.table("upload_chunks").create_index(["owner"])
    # rowid = upload_chunks.id; the owner filter joins upload_chunks (the FTS table has no owner column)
    db.execute("create virtual table upload_chunks_fts using fts5(text, tokenize='porter unicode61')")


@migration
def m108_memories(db: Database) -> None:
    """Memories per user (text, category, pinned, source, uses, last use) with an FTS5 index; memory switches."""
    db.table("memories").create(
        {
            "id": str,
            "owner": str,
            "text": str,
            "category": str,
            "pinned": int,
            "source": str,
            "uses": int,
            "created_at": float,
            "updated_at": float,
            "last_used_at": float,
        },
        pk="id",
        not_null={"owner", "text"},
    )
    db.table("memories").create_index(["owner", "created_at"])
    # porter stemming so "cats" recalls "cat"; triggers keep the index in step with the table
    db.table("memories").enable_fts(["text", "category"], create_triggers=True, tokenize="porter unicode61")
    db.table("memory_settings").create(
        {"owner": str, "enabled": int, "auto_extract": int, "updated_at": float}, pk="owner"
    )


@migration
def m109_research(db: Database) -> None:
    """Research jobs: one row per job (its id is the run id), with the result once it has ended."""
    db.table("research_jobs").create(
        {
            "job_id": str,
            "owner": str,
            "session_id": str,
            "query": str,
            "status": str,
            "partial": int,
            "message_id": int,
            "report": str,
            "sources": str,
            "findings": str,
            "stats": str,
            "error": str,
            "created_at": float,
            "updated_at": float,
            "finished_at": float,
        },
        pk="job_id",
        not_null={"owner", "session_id", "query", "status"},
    )
    db.table("research_jobs").create_index(["owner", "created_at"])
    db.table("research_jobs").create_index(["owner", "session_id"])


@migration
def m110_workflows(db: Database) -> None:
    """Agent Alloy workflows: a supervisor agent and its specialists, per owner (members as JSON)."""
    db.table("workflows").create(
        {
            "id": str,
            "owner": str,
            "name": str,
            "description": str,
            "supervisor_agent_id": str,
            "members": str,
            "created_at": float,
            "updated_at": float,
        },
        pk=("owner", "id"),
        not_null={"owner", "id", "name", "supervisor_agent_id", "members"},
    )


@migration
def m111_page(db: Database) -> None:
    """Full-text search over message text (FTS5, kept in sync by triggers), per-user settings, disabled accounts."""
    # one statement at a time: executescript() would commit the migration's transaction half-way
    statements = [
        "create virtual table messages_fts using fts5(content, content='messages', content_rowid='id',"
        " tokenize='unicode61 remove_diacritics 2')",
        "create trigger messages_fts_ai after insert on messages begin"
        " insert into messages_fts(rowid, content) values (new.id, coalesce(new.content, '')); end",
        "create trigger messages_fts_ad after delete on messages begin"
        " insert into messages_fts(messages_fts, rowid, content) values ('delete', old.id, coalesce(old.content, ''));"
        " end",
        "create trigger messages_fts_au after update of content on messages begin"
        " insert into messages_fts(messages_fts, rowid, content) values ('delete', old.id, coalesce(old.content, ''));"
        " insert into messages_fts(rowid, content) values (new.id, coalesce(new.content, '')); end",
        "insert into messages_fts(messages_fts) values ('rebuild')",
    ]
    for statement in statements:
        db.execute(statement)
    db.table("user_settings").create(
        {"owner": str, "key": str, "value": str, "updated_at": float}, pk=("owner", "key"), not_null={"owner", "key"}
    )
    db.table("users").add_column("disabled_at", float)


@migration
def m112_code_tools_access(db: Database) -> None:
    """Who may use the code tools: an admin's per-user and per-profile settings (no row = the default)."""
    db.table("code_tools_access").create(
        {
            "kind": str,
            "target_id": str,
            "code_tools": int,
            "network": int,
            "updated_by": str,
            "updated_at": float,
        },
        pk=("kind", "target_id"),
        not_null={"kind", "target_id"},
    )
