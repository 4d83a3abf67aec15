"""Migrations m120 onwards: branches, provider connections, packed run events, hot-path indexes, the
/v1 API, sign-ins, organised chats, prompts, shares, ratings, MCP servers, the search index's watermark.

Registered in file order by ``migration`` (odysseus/store/migrations.py, which runs them) after
``migrations_before_120``. Never edit one that has shipped; add a new one at the end."""

from __future__ import annotations

from sqlite_utils import Database

from .migrations import migration


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
