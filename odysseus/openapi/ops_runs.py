"""Operations of turns and their streams: chat, agent, history and the model's window."""

from __future__ import annotations

from typing import List

from .schemas import AGENT, AGENT_TURN, BOOL, CHAT_TURN, FOLDER, ID, INT, MESSAGE_ID, Op, PAGE, PROFILE, STR, TURN

RUN_OPERATIONS: List[Op] = [
    # chat (spec: chat-stream-events.md)
    Op(
        "POST",
        "/api/chat_stream",
        "Start a turn and stream it (chat projection); message is required except with regenerate_of.",
        "chat",
        CHAT_TURN,
        (),
        stream=True,
    ),
    Op("GET", "/api/chat/stream_status/<session_id>", "The session's newest run: status and counters.", "chat"),
    Op(
        "GET",
        "/api/chat/resume/<session_id>",
        "Replay the session's run after a cursor, then follow it.",
        "chat",
        query=(("after", INT),),
        headers=(("Last-Event-ID", STR),),
        stream=True,
    ),
    Op(
        "POST",
        "/api/chat/stop/<session_id>",
        "Stop the session's run named by its run id.",
        "chat",
        {"run_id": ID},
        headers=(("X-Odysseus-Run-Id", STR),),
    ),
    Op("POST", "/api/chat/background", "Queue a turn as a background job.", "chat", TURN, ("message",), status=202),
    Op("GET", "/api/chat/background", "The caller's background jobs.", "chat", query=PAGE),
    Op("GET", "/api/chat/background/<job_id>", "One background job.", "chat"),
    Op("POST", "/api/chat/background/<job_id>/cancel", "Cancel a background job.", "chat"),
    # agent API (spec: agent-stream-and-detached-runs.md)
    Op(
        "POST",
        "/api/agent/chat/stream",
        "Start an agent turn and stream it (named events).",
        "agent",
        AGENT_TURN,
        ("message",),
        stream=True,
    ),
    Op(
        "POST",
        "/api/agent/chat",
        "Run an agent turn to the end; answer with the result.",
        "agent",
        AGENT_TURN,
        ("message",),
    ),
    Op(
        "GET",
        "/api/agent/chat/stream/attach",
        "Attach to a run by id (named events).",
        "agent",
        query=(("run_id", ID), ("after", INT)),
        headers=(("Last-Event-ID", STR),),
        stream=True,
    ),
    Op("GET", "/api/agent/chat/runs", "The caller's detached runs, newest first.", "agent", query=PAGE),
    Op("POST", "/api/agent/chat/runs/<run_id>/cancel", "Cancel a run.", "agent"),
    Op("GET", "/api/agent/profiles", "The caller's agent profiles.", "agent"),
    Op("POST", "/api/agent/profiles", "Create an agent profile.", "agent", PROFILE, ("name",), status=201),
    Op("GET", "/api/agent/profiles/<profile_id>", "One agent profile.", "agent"),
    Op("PATCH", "/api/agent/profiles/<profile_id>", "Change an agent profile.", "agent", PROFILE),
    Op("DELETE", "/api/agent/profiles/<profile_id>", "Delete an agent profile.", "agent"),
    Op("GET", "/api/agent/tools", "The tools an agent's tools list may name (those the caller can use).", "agent"),
    Op("GET", "/api/agents", "The caller's named agents.", "agent"),
    Op("POST", "/api/agents", "Create a named agent.", "agent", AGENT, status=201),
    Op("GET", "/api/agents/<agent_id>", "One named agent.", "agent"),
    Op("PATCH", "/api/agents/<agent_id>", "Change a named agent.", "agent", AGENT),
    Op("DELETE", "/api/agents/<agent_id>", "Delete a named agent.", "agent"),
    # history
    Op("POST", "/api/sessions", "Create a session.", "history", {"title": STR}, status=201),
    Op(
        "GET",
        "/api/sessions",
        "The caller's sessions, most recently updated first, paged (limit <= 500); archived ones with archived=true.",
        "history",
        query=PAGE
        + (
            ("before", {"type": "string", "description": "next_before of the previous page"}),
            ("origin", {"type": "string", "enum": ["page", "api", "all"]}),
            ("archived", {"type": "string", "enum": ["true", "false"]}),
            ("pinned", {"type": "string", "enum": ["true", "false"]}),
            ("folder_id", {"type": "string", "description": "a folder's id, or none"}),
        ),
    ),
    Op("GET", "/api/sessions/<session_id>", "One session.", "history"),
    Op(
        "PATCH",
        "/api/sessions/<session_id>",
        "Rename a session, move it into a folder (null: none), pin or archive it.",
        "history",
        {"title": STR, "folder_id": {"type": ["string", "null"]}, "pinned": BOOL, "archived": BOOL},
    ),
    Op("GET", "/api/folders", "The caller's chat folders, each with its session_count.", "history"),
    Op("POST", "/api/folders", "Create a chat folder.", "history", FOLDER, ("name",), status=201),
    Op("PATCH", "/api/folders/<folder_id>", "Rename a chat folder.", "history", FOLDER, ("name",)),
    Op("DELETE", "/api/folders/<folder_id>", "Delete a chat folder (its chats stay, in no folder).", "history"),
    Op(
        "POST",
        "/api/sessions/<session_id>/share",
        "Share a chat: snapshot it now behind a new unguessable link (no sign-in needed to read it).",
        "history",
        status=201,
    ),
    Op("GET", "/api/shares", "The caller's share links, newest first.", "history"),
    Op("DELETE", "/api/shares/<share_id>", "Revoke a share link (its url answers 404 from now on).", "history"),
    Op("DELETE", "/api/sessions/<session_id>", "Delete a session (stops its run first).", "history"),
    Op(
        "POST",
        "/api/compare/start",
        "Store a comparison's question once; each pane then streams with compare_of and saves its reply.",
        "chat",
        {
            **{
                k: TURN[k]
                for k in ("message", "session", "session_id", "attachments", "use_rag", "use_memory", "use_web")
            },
            "models": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 200},
                "minItems": 2,
                "maxItems": 8,
            },
        },
        ("message", "models"),
        status=201,
    ),
    Op(
        "POST",
        "/api/compare/keep",
        "Save the chosen reply of a compare with the user's message.",
        "chat",
        {
            "message": {"type": "string", "minLength": 1},
            "content": {"type": "string", "minLength": 1},
            "thinking": STR,
            "model": ID,
            "session": ID,
            "session_id": ID,
        },
        ("message", "content"),
        status=201,
    ),
    Op(
        "PUT",
        "/api/sessions/<session_id>/branch",
        "Show the branch through one of a message's alternatives.",
        "history",
        {"message_id": {"type": "integer", "minimum": 1}},
        ("message_id",),
    ),
    Op(
        "GET",
        "/api/sessions/<session_id>/messages",
        "The selected branch's newest messages in order (each with its alternatives), paged back by id.",
        "history",
        query=(
            ("before", {"type": "integer", "minimum": 1}),
            ("limit", {"type": "integer", "minimum": 1, "maximum": 1000}),
        ),
    ),
    # the model's window (docs/guide.md "Context window")
    Op(
        "GET",
        "/api/sessions/<session_id>/context",
        "How much of the model's window the next turn would use.",
        "history",
        query=(("model", ID),),
    ),
    Op(
        "POST",
        "/api/sessions/<session_id>/compact",
        "Summarise the older half of the conversation now (409 while a reply is being written).",
        "history",
        {"model": ID},
    ),
    Op("PATCH", f"/api/messages/{MESSAGE_ID}", "Edit a message's content.", "history", {"content": STR}, ("content",)),
    Op("DELETE", f"/api/messages/{MESSAGE_ID}", "Delete a message.", "history"),
    # ratings of replies (issue 36)
    Op(
        "PUT",
        f"/api/messages/{MESSAGE_ID}/rating",
        "Rate one of your replies: thumbs up (1) or down (-1), an optional comment.",
        "history",
        {"value": {"type": "integer", "enum": [1, -1]}, "comment": {"type": ["string", "null"], "maxLength": 2000}},
        ("value",),
    ),
    Op("DELETE", f"/api/messages/{MESSAGE_ID}/rating", "Remove the rating of one of your replies.", "history"),
    Op("GET", "/api/ratings", "Your rated replies, newest rating first.", "history", query=PAGE),
]
