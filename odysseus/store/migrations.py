"""Ordered schema migrations over sqlite-utils (``m001_...`` style).

Each migration runs once, in order, recorded in ``_migrations``. Never edit a
migration that has shipped; add a new one. Their numbers increase in the order they run
(``tests/test_migration_names.py`` keeps it so). A shipped migration that is renamed keeps its
old name in ``RENAMED``: ``migrate`` renames its ``_migrations`` row first, so a database made
under the old name neither runs it again nor skips anything.
"""

from __future__ import annotations

import datetime
from typing import Callable, Dict, List

from sqlite_utils import Database

MIGRATIONS: List[Callable[[Database], None]] = []

#: old name -> name now, for shipped migrations renamed so that their numbers run in order
RENAMED: Dict[str, str] = {
    "m108_research": "m109_research",  # shared m108 with m108_memories
    "m109_workflows": "m110_workflows",
    "m105_code_tools_access": "m112_code_tools_access",  # ran after m111_page
}


def migration(fn: Callable[[Database], None]) -> Callable[[Database], None]:
    """Register ``fn`` as the next migration."""
    MIGRATIONS.append(fn)
    return fn


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


def migrate(db: Database) -> None:
    """Apply every migration not yet applied (the caller holds one transaction around all of them)."""
    if "_migrations" not in db.table_names():
        db.table("_migrations").create({"name": str, "applied_at": str}, pk="name")
    for old, new in RENAMED.items():  # rows written under an old name (a row under the new one wins)
        db.execute("update or ignore _migrations set name = ? where name = ?", [new, old])
        db.execute("delete from _migrations where name = ?", [old])
    done = {row["name"] for row in db["_migrations"].rows}
    for fn in MIGRATIONS:
        if fn.__name__ not in done:
            fn(db)
            db.execute(
                "insert into _migrations (name, applied_at) values (?, ?)",
                [fn.__name__, datetime.datetime.now(datetime.timezone.utc).isoformat()],
            )


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


@migration
def m120_page2_branches(db: Database) -> None:
    """Conversation trees: each message's parent, and the selected branch (its newest message) per session."""
    db.table("messages").add_column("parent_id", int)
    # existing chats were linear: each message follows the one before it in its session
    db.execute(
        "update messages set parent_id = (select max(m2.id) from messages m2"
        " where m2.session_id = messages.session_id and m2.id < messages.id)"
    )
    db.table("messages").create_index(["session_id", "parent_id"])
    db.table("sessions").add_column("branch_head", int)


@migration
def m130_provider_connections(db: Database) -> None:
    """Provider connections an admin adds in the settings screen (keys stored as given; names unique, any case)."""
    db.table("provider_connections").create(
        {
            "id": str,
            "name": str,
            "kind": str,
            "base_url": str,
            "api_key": str,
            "default_model": str,
            "models": str,
            "enabled": int,
            "created_at": float,
            "updated_at": float,
            "created_by": str,
        },
        pk="id",
        not_null={"id", "name", "kind"},
    )
    db.execute("create unique index provider_connections_name on provider_connections (name collate nocase)")


@migration
def m135_retired_provider_names(db: Database) -> None:
    """Names of provider connections the admin deleted or renamed, so ``name/model`` stays a clear 404 on every
    worker and after a restart (not a bare model name handed to whichever provider is left)."""
    db.execute("create table retired_provider_names (name text primary key collate nocase, retired_at float)")


@migration
def m140_run_event_packs(db: Database) -> None:
    """Packed durable events: one ``run_events`` row may carry a run's consecutive events ``from_seq..seq``.

    ``seq`` stays the row's key and is its LAST event's id, so ``seq > cursor`` still finds
    every row holding an event after the cursor and ``max(seq)`` is still the newest id;
    ``from_seq`` is null for a row of one event (every row written before this migration).
    """
    db.table("run_events").add_column("from_seq", int)


@migration
def m150_runs_index_upkeep(db: Database) -> None:
    """[issue 22] Indexes every turn pays for, and the purge's own one.

    ``idx_runs_status`` goes: ``idx_runs_status_lease_until`` starts with ``status`` and answers
    the same lookups, and each index is one more page a turn's start and its final save write.
    Runs made before m005 get ``events_purged = 0`` (they have no durable events), so the purge's
    ``events_purged = 0 and finished_at < ?`` finds them through ``idx_runs_events_purged_finished_at``
    instead of scanning every run (it read ``coalesce(events_purged, 0)``, which no index answers).
    """
    db.execute("drop index if exists idx_runs_status")
    db.execute("update runs set events_purged = 0 where events_purged is null")


@migration
def m155_messages_by_client_id(db: Database) -> None:
    """[issue 22] A send's ``client_message_id`` without a session (the page's first message of every new
    chat) looks up the session it was first sent in by owner and client id: without this index that read
    scanned every message, on the request path (about 15 ms at 200,000 messages). Partial: replies and
    messages sent without a client id (most API sends) add nothing to it."""
    db.execute(
        "create index if not exists idx_messages_owner_client_message_id on messages (owner, client_message_id)"
        " where client_message_id is not null"
    )


@migration
def m220_openai_api(db: Database) -> None:
    """[issue 33] The OpenAI-compatible API: what each /v1 response or completion fixed when it was created
    (its head: model, instructions, metadata, client tools, ...), keyed by its id (``resp_<r>`` or
    ``chatcmpl-<r>`` for run ``run_<r>``: the id names the run, no second index) and naming its run; and
    where a session came from (``origin``: null for the page's own chats, ``api`` for /v1 ones), so the
    default chat list can leave the API's conversations out with an index rather than a scan. That index
    replaces (owner, updated_at), which it answers too: every message moves its session's ``updated_at``,
    so a second index there would be a write more for every turn."""
    db.table("openai_responses").create(
        {
            "id": str,
            "owner": str,
            "run_id": str,
            "kind": str,
            "created_at": float,
            "stored": int,
            "head": str,
        },
        pk="id",
        not_null={"id", "owner", "run_id", "kind", "head"},
    )
    db.table("sessions").add_column("origin", str)
    db.execute("create index if not exists idx_sessions_owner_origin_updated on sessions (owner, origin, updated_at)")
    db.execute("drop index if exists idx_sessions_owner_updated_at")


@migration
def m305_sign_ins(db: Database) -> None:
    """[issue 38] Browser sign-ins held on the server: the session cookie names one row, and signing out
    deletes it, so a copied cookie stops working (a signed cookie alone stayed valid for SESSION_DAYS).
    Cookies from before this migration name no row: their browsers sign in once more."""
    db.execute("create table if not exists sign_ins (id text primary key, owner text not null, created_at real)")
    db.execute("create index if not exists idx_sign_ins_owner on sign_ins (owner)")
    db.execute("create index if not exists idx_sign_ins_created_at on sign_ins (created_at)")


@migration
def m306_upload_text(db: Database) -> None:
    """[issue 38] An upload's text is extracted once, at upload (``context/extract.py``): whether that
    worked (``text_status``: extracted, cut, not_extracted) and why not (``text_note``). Rows from before
    have neither and are extracted the first time they are used."""
    db.table("uploads").add_column("text_status", str)
    db.table("uploads").add_column("text_note", str)


@migration
def m307_organised_chats(db: Database) -> None:
    """[issue 36] Organised chats: the owner's folders (names unique per owner in any case), and each
    session's ``folder_id`` (null: none), ``pinned`` and ``archived`` (0/1). Partial indexes answer the
    sidebar's lists of pinned, foldered and archived chats (a few each, sorted by date after the lookup);
    the plain chat list keeps using ``idx_sessions_owner_origin_updated``. They leave ``updated_at`` out,
    so a message (which moves its session's ``updated_at``) writes none of them."""
    db.table("folders").create(
        {"id": str, "owner": str, "name": str, "created_at": float, "updated_at": float},
        pk="id",
        not_null={"id", "owner", "name"},
    )
    db.execute("create unique index if not exists idx_folders_owner_name on folders (owner, name collate nocase)")
    db.table("sessions").add_column("folder_id", str)
    db.table("sessions").add_column("pinned", int, not_null_default=0)
    db.table("sessions").add_column("archived", int, not_null_default=0)
    # none of them holds updated_at, which every message moves: a turn writes no index but the list's own
    db.execute(
        "create index if not exists idx_sessions_folder on sessions (owner, folder_id) where folder_id is not null"
    )
    for flag in ("pinned", "archived"):  # (owner, origin), as the list asks
        db.execute(f"create index if not exists idx_sessions_{flag} on sessions (owner, origin) where {flag} = 1")


@migration
def m308_prompts(db: Database) -> None:
    """[issue 36] The prompt library: a user's saved prompts, each with a title, a ``/command`` (unique per
    user, so typing it in the composer finds one prompt) and a content with ``{{variables}}``."""
    db.execute(
        "create table if not exists prompts (id text primary key, owner text not null, title text not null,"
        " command text not null, content text not null, created_at real, updated_at real)"
    )
    db.execute("create unique index if not exists idx_prompts_owner_command on prompts (owner, command)")


@migration
def m309_shares(db: Database) -> None:
    """[issue 36] Share links: a read-only snapshot of a chat (its title and messages as they were when it
    was shared, JSON in ``snapshot``) behind an unguessable ``token``; the owner lists and revokes them.
    Deleting the chat deletes its shares."""
    db.table("shares").create(
        {
            "id": str,
            "owner": str,
            "session_id": str,
            "token": str,
            "title": str,
            "snapshot": str,
            "message_count": int,
            "created_at": float,
        },
        pk="id",
        not_null={"id", "owner", "session_id", "token", "snapshot"},
    )
    db.execute("create unique index if not exists idx_shares_token on shares (token)")
    db.execute("create index if not exists idx_shares_owner_created on shares (owner, created_at)")
    db.execute("create index if not exists idx_shares_session on shares (session_id)")


@migration
def m310_ratings(db: Database) -> None:
    """[issue 36] A reply's rating, stored with the message: ``rating`` (1 up, -1 down, null unrated), an
    optional ``rating_comment`` and ``rated_at``. The partial index holds only rated messages, so a user's
    list of ratings and the admin's count per model read those rows and never scan the whole table."""
    db.table("messages").add_column("rating", int)
    db.table("messages").add_column("rating_comment", str)
    db.table("messages").add_column("rated_at", float)
    db.execute("create index if not exists idx_messages_rated on messages (owner, rated_at) where rating is not null")


@migration
def m311_mcp_servers(db: Database) -> None:
    """[issue 34] MCP servers the admin added through the API and the page, one row per server (its name
    is the key; the configuration's servers are not stored). Lists, maps and the approval are JSON text.
    Every write bumps ``mcp_servers_version`` in ``settings`` so each worker can tell its set is stale."""
    db.execute(
        "create table if not exists mcp_servers (name text primary key, command text, args text, env text,"
        " url text, headers text, enabled integer not null default 1, sandbox integer not null default 1,"
        " network integer not null default 0, timeout real, approval text, tools text, users text,"
        " profiles text, created_at real, updated_at real, created_by text)"
    )


@migration
def m312_turn_index_pages(db: Database) -> None:
    """[issue 40] Fewer index pages in every turn's two transactions.

    - The message search index (``messages_fts``) no longer grows inside a turn: it covers every message
      up to a watermark (``messages_fts_state.indexed_through``), and messages past it are added in
      batches on the writer's thread (``store/search.py``: before every search, and by the janitor).
      The triggers keep the indexed part exact: an edit or a delete of a message at or under the
      watermark updates the index as before, and a row reusing an id under it (the newest message
      deleted, then a new one) is indexed at once. Messages past it have no index rows to maintain.
    - ``idx_messages_session_id_client_message_id`` goes: every message wrote it (replies too, with a
      null client id), and the partial ``(owner, client_message_id)`` index of m155 answers the same
      lookups (which all name the owner and a client id).
    - The purge's index keeps only finished runs with events to purge: a run's start writes no entry,
      its final save one. ``events_purged = 0 and finished_at < ?`` still uses it.
    """
    db.execute(
        "create table messages_fts_state (id integer primary key check (id = 1), indexed_through integer not null)"
    )
    # the triggers of m111 kept the index complete up to now
    db.execute("insert into messages_fts_state (id, indexed_through) select 1, coalesce(max(id), 0) from messages")
    under = "(select indexed_through from messages_fts_state)"
    for statement in [
        "drop trigger messages_fts_ai",
        "drop trigger messages_fts_ad",
        "drop trigger messages_fts_au",
        f"create trigger messages_fts_ai after insert on messages when new.id <= {under} begin"
        " insert into messages_fts(rowid, content) values (new.id, coalesce(new.content, '')); end",
        f"create trigger messages_fts_ad after delete on messages when old.id <= {under} begin"
        " insert into messages_fts(messages_fts, rowid, content) values ('delete', old.id, coalesce(old.content, ''));"
        " end",
        f"create trigger messages_fts_au after update of content on messages when old.id <= {under} begin"
        " insert into messages_fts(messages_fts, rowid, content) values ('delete', old.id, coalesce(old.content, ''));"
        " insert into messages_fts(rowid, content) values (new.id, coalesce(new.content, '')); end",
        "drop index if exists idx_messages_session_id_client_message_id",
        "drop index if exists idx_runs_events_purged_finished_at",
        "create index idx_runs_events_purged_finished_at on runs (events_purged, finished_at)"
        " where events_purged = 0 and finished_at is not null",
    ]:
        db.execute(statement)
