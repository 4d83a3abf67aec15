"""Canonical events rebuilt from history for a turn whose log was already evicted.

Used when a repeated ``client_message_id`` arrives after the replay window: the client
gets the saved final state, nothing is generated again.
"""

from __future__ import annotations

from typing import Iterator, Optional

from flask import Response

from ..events import CLOSE, DELTA, DONE, ERROR, MESSAGE_SAVED, MODEL_INFO, RUN_STARTED, Event
from .streaming import Projection, project, run_stream, sse_response
from .turn_start import StartedTurn, ext


def stream_started_turn(owner: str, started: StartedTurn, projection: Projection, terminal_type: str) -> Response:
    """Follow the turn's live run, or replay its saved final state when its log is gone."""
    headers = {"X-Odysseus-Session-Id": started.session_id}
    if started.run is not None:
        return run_stream(ext("runs"), started.run, 0, projection, headers)
    row = started.replay_row
    message = ext("store").messages.get(owner, row["message_id"]) if row and row.get("message_id") else None
    if row:
        headers["X-Odysseus-Run-Id"] = row["run_id"]
    # the body is read after the view returned (no app context): everything it needs is passed in
    return sse_response(project(final_state_events(row, message, terminal_type), projection), headers)


def final_state_events(row: Optional[dict], message: Optional[dict], terminal_type: str) -> Iterator[Event]:
    """The events of a finished run, from its run row and saved reply."""
    if row is None or message is None:
        status = (row or {}).get("status", "unknown")
        yield Event(ERROR, {"error": f"the earlier request ended as {status}", "status": 409})
        yield Event(CLOSE, {})
        return
    meta = message["metadata"]
    yield Event(RUN_STARTED, {"run_id": row["run_id"], "session_id": row["session_id"], "model": row["model"],
                              "replayed": True})
    if meta.get("model_info"):
        yield Event(MODEL_INFO, meta["model_info"])
    if message["thinking"]:
        yield Event(DELTA, {"delta": message["thinking"], "thinking": True})
    if message["content"]:
        yield Event(DELTA, {"delta": message["content"]})
    yield Event(MESSAGE_SAVED, {"message_id": message["id"], "session_id": row["session_id"], "role": "assistant",
                                "replayed": True})
    yield Event(terminal_type, {"data": {"status": row["status"], "run_id": row["run_id"],
                                         "message_id": message["id"], "replayed": True}})
    if row["status"] == "done":
        yield Event(DONE, {"task_id": row["run_id"], "thinking": message["thinking"],
                           "total_time_ms": meta.get("total_time_ms"), "session_id": row["session_id"]})
    elif row["status"] in ("error", "interrupted"):
        yield Event(ERROR, {"error": row.get("error") or row["status"],
                            "status": (meta.get("error") or {}).get("status") or 502})
    yield Event(CLOSE, {})
