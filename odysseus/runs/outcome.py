"""What a run's end records, as pure functions of the run and its outcome: the saved reply's
metadata, the terminal record, and the tail of events every run log ends with (``message_saved``,
the terminal record, ``done`` or ``error``, ``close``), also for a run whose final save failed and
for one recovered after its worker died. ``RunEngine._record_outcome`` saves and logs them.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..events import CANCELLED, CHAT_TERMINAL, CLOSE, DONE, ERROR, MESSAGE_SAVED, Event
from .run import Outcome, Run


def cancel_outcome(run: Run) -> Outcome:
    """The outcome of a run that ended by its cancel token: a timeout, a shutdown, or a stop (its reason)."""
    reason = run.cancel.reason or "stopped"
    if reason.startswith("timeout:"):
        which = reason.split(":", 1)[1]
        return Outcome("error", "timeout", f"Run timed out ({which} limit)", 504, timeout=which)
    if reason == "shutdown":
        return Outcome("interrupted", "interrupted", "the server restarted during this run", 503, retry_after=2)
    return Outcome("stopped", reason)


def outcome_error(outcome: Outcome) -> Optional[Dict[str, Any]]:
    """The ``error`` object of a failed outcome (message, HTTP status, retry_after), else None."""
    error: Optional[Dict[str, Any]] = None
    if outcome.error:
        error = {"message": outcome.error, "status": outcome.http_status}
        if outcome.retry_after is not None:
            error["retry_after"] = outcome.retry_after
    return error


def reply_metadata(run: Run, outcome: Outcome, elapsed_ms: float, error: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The saved assistant message's metadata: status, reasons, route, usage, metrics, and the mode's own."""
    metadata = {
        "run_id": run.run_id,
        "status": outcome.status,
        "stop_reason": outcome.stop_reason,
        "stopped": outcome.status == "stopped",
        "partial": outcome.status != "done",
        "model_info": run.model_info,
        "usage": run.usage,
        "metrics": run.metrics,
        "finish_reason": run.finish_reason,
        "total_time_ms": elapsed_ms,
        "fallback": run.fallback,
    }
    if error:
        metadata["error"] = error
    if outcome.status == "interrupted":
        metadata["interrupted"] = True
    if run.context is not None:  # always, here: a run settles only after its finalize built this
        metadata.update(run.context.metadata)
    return metadata


def terminal_record(run: Run, outcome: Outcome, elapsed_ms: float, error: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The terminal record's data (``chat_terminal`` / ``agent_terminal``), without its ``message_id``."""
    terminal = {
        "status": outcome.status,
        "run_id": run.run_id,
        "session_id": run.session_id,
        "stop_reason": outcome.stop_reason,
        "partial": outcome.status != "done",
        "content_length": len(run.content),
        "route": (run.model_info or {}).get("route"),
        "finish_reason": run.finish_reason,
        "usage": run.usage,
        "timing": {"total_time_ms": elapsed_ms},
        "fallback": run.fallback,
    }
    if error:
        terminal["error"] = error
    if run.context is not None:  # (as in reply_metadata)
        terminal.update(run.context.terminal)
    return terminal


def failed_save_tail(run: Run) -> List[Event]:
    """The tail of a run whose final save raised: the terminal record as an error, ``error``, ``close``."""
    terminal = {
        "status": "error",
        "run_id": run.run_id,
        "session_id": run.session_id,
        "message_id": None,
        "partial": True,
        "error": {"message": "Could not save the reply", "status": 500},
    }
    events = [
        Event(run.terminal_type, {"data": terminal}),
        Event(ERROR, {"error": "Could not save the reply", "status": 500}),
        Event(CLOSE, {}),
    ]
    return events


#: an agent turn's ``completion`` values that are not a pause (the terminal record, agent/agent_loop.py)
NOT_PAUSED = ("complete", "incomplete", "running", "stopped", "failed")


def pause_fields(terminal: Dict[str, Any]) -> Dict[str, Any]:
    """What the ``done`` event says of an agent turn's end: its completion, whether it paused, for which approval.

    Empty for a run without a completion (chat, research): its ``done`` stays as it was."""
    completion = terminal.get("completion")
    if not completion:
        return {}
    fields: Dict[str, Any] = {"completion": completion, "paused": completion not in NOT_PAUSED}
    if terminal.get("approval_id"):
        fields["approval_id"] = terminal["approval_id"]
    return fields


def tail_events(
    terminal_type: str,
    run_id: str,
    session_id: str,
    status: str,
    message_id: Optional[int],
    terminal: Dict[str, Any],
    thinking: str,
    elapsed_ms: Optional[float],
    error: Optional[str],
    http_status: Optional[int],
    retry_after: Optional[float] = None,
) -> List[Event]:
    """The events that end every run: message_saved, the terminal record, done, cancelled or error, close."""
    events = [
        Event(MESSAGE_SAVED, {"message_id": message_id, "session_id": session_id, "role": "assistant"}),
        Event(terminal_type, {"data": terminal}),
    ]
    if status == "done":
        done = {"task_id": run_id, "thinking": thinking, "total_time_ms": elapsed_ms, "session_id": session_id}
        events.append(Event(DONE, {**done, **pause_fields(terminal)}))
    elif status == "stopped":
        stopped = {"task_id": run_id, "stop_reason": terminal.get("stop_reason"), "session_id": session_id}
        events.append(Event(CANCELLED, stopped))
    elif status in ("error", "interrupted"):
        body: Dict[str, Any] = {"error": error, "status": http_status}
        if retry_after is not None:
            body["retry_after"] = retry_after
        events.append(Event(ERROR, body))
    events.append(Event(CLOSE, {}))
    return events


def recovery_tail(row: Dict[str, Any], message_id: Optional[int]) -> List[Event]:
    """The tail of a run recovered after its worker died."""
    terminal = {
        "status": "interrupted",
        "run_id": row["run_id"],
        "session_id": row["session_id"],
        "message_id": message_id,
        "stop_reason": "interrupted",
        "partial": True,
        "interrupted": True,
    }
    return tail_events(
        row.get("terminal_type") or CHAT_TERMINAL,
        row["run_id"],
        row["session_id"],
        "interrupted",
        message_id,
        terminal,
        "",
        None,
        "the server restarted during this run",
        503,
    )
