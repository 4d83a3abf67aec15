"""A /v1 response or completion as an object, wherever its run is: ``GET /v1/responses/{id}``, the
answer of a non-streamed request, cancel.

The source is the run engine's policy (``runs/follow.py``), read through the same folds as the
streams: the memory log while this process holds the run, else the durable log in SQLite inside the
replay window (another worker's run, after a restart), else the saved reply (``rebuild``): its
content and thinking cut by the output shape the turn recorded (``turn.recorded``), with the outcome
from its metadata. So the object is the same from every source.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Tuple

from ..events import Event
from ..runs.durable import as_entry, read_events
from ..runs.follow import durable_available
from .chat_wire import ChatFold
from .head import CHAT_COMPLETION, ResponseHead
from .responses_wire import UNFINISHED, ResponseFold, response_status, text_item, usage_object
from .turn import META

Entry = Tuple[Event, Optional[str]]


def head_of(row: Dict[str, Any]) -> ResponseHead:
    """The head stored with a response's row."""
    return ResponseHead.from_json(row["head"])


def log_entries(engine: Any, row: Dict[str, Any]) -> Optional[Iterable[Entry]]:
    """The run's log from its first event: from memory while held here, else durable; None when neither is."""
    run = engine.get(row["owner"], row["run_id"])
    if run is not None and not run.log.released:
        held: List[Entry] = run.log.read_after(run.log.base)
        return held
    if durable_available(row) and row.get("first_seq"):
        return _durable(engine.store, row["run_id"], int(row["first_seq"]) - 1)
    return None


def _durable(store: Any, run_id: str, after: int) -> Iterable[Entry]:
    while True:
        with store.locked.read() as db:
            rows = read_events(db, run_id, after, 500)
        for row in rows:
            yield as_entry(*row)
        if len(rows) < 500:
            return
        after = rows[-1][0]


def record_of(meta: Dict[str, Any]) -> Dict[str, Any]:
    """A saved reply's outcome in the shape of its run's terminal record (what the folds read)."""
    return {
        "status": meta.get("status") or "done",
        "stop_reason": meta.get("stop_reason"),
        "finish_reason": meta.get("finish_reason"),
        "error": meta.get("error"),
        "usage": meta.get("usage"),
        "timing": {"total_time_ms": meta.get("total_time_ms")},
    }


def rebuild(head: ResponseHead, message: Dict[str, Any]) -> Dict[str, Any]:
    """The response object from a saved reply (after the replay window, or a restart that lost the log)."""
    meta = message.get("metadata") or {}
    record = record_of(meta)
    status, error, incomplete = response_status(record)
    ended = "completed" if status == "completed" else "incomplete"
    content, thinking = message.get("content") or "", message.get("thinking") or ""
    shape: List[Dict[str, Any]] = (meta.get(META) or {}).get("output") or _plain_shape(content, thinking)
    output = []
    for index, entry in enumerate(shape):
        kind = entry.get("type")
        if kind in ("message", "reasoning"):
            source = content if kind == "message" else thinking
            prefix = "msg" if kind == "message" else "rs"
            text = source[int(entry.get("start") or 0) : int(entry.get("end") or 0)]
            output.append(text_item(kind, f"{prefix}_{head.suffix}_{index}", text, entry.get("status") or ended))
        else:
            item = dict(entry)
            if kind == "mcp_call" and item.get("status") == "in_progress":
                item.update(status="failed", error=UNFINISHED)
            output.append(item)
    body = head.response(status)
    elapsed = record["timing"]["total_time_ms"]
    body.update(
        output=output,
        error=error,
        incomplete_details=incomplete,
        usage=usage_object(record["usage"]),
        completed_at=round(head.created_at + elapsed / 1000.0, 3)
        if status == "completed" and elapsed is not None
        else None,
    )
    return body


def _plain_shape(content: str, thinking: str) -> List[Dict[str, Any]]:
    """The shape of a reply saved without one (a run recovered after its worker died): reasoning, then text."""
    shape = []
    if thinking:
        shape.append({"type": "reasoning", "start": 0, "end": len(thinking)})
    if content:
        shape.append({"type": "message", "start": 0, "end": len(content)})
    return shape


def response_object(engine: Any, row: Dict[str, Any]) -> Dict[str, Any]:
    """The response object of ``row`` (an ``OpenAIResponseRepo.find`` row), from the best source."""
    head = head_of(row)
    entries = log_entries(engine, row)
    if entries is not None:
        fold = ResponseFold(head, emit=False)
        for event, payload in entries:
            fold.feed(event, payload)
        if fold.status != "in_progress" or row.get("status") == "running":
            return fold.snapshot()
    message = _reply(engine.store, row)
    if message is not None:
        return rebuild(head, message)
    return head.response("in_progress" if row.get("status") == "running" else "failed")


def chat_fold(engine: Any, row: Dict[str, Any]) -> Optional[ChatFold]:
    """A chat completion's run folded from its log (``completion()``, ``record``); None when the log is gone."""
    head = head_of(row)
    assert head.kind == CHAT_COMPLETION
    entries = log_entries(engine, row)
    if entries is None:
        return None
    fold = ChatFold(head, emit=False)
    for event, payload in entries:
        fold.feed(event, payload)
    return fold


def terminal_sequence(store: Any, row: Dict[str, Any]) -> Optional[int]:
    """The ``sequence_number`` a response's terminal event had, from its saved reply (None without one).

    Two lifecycle events (created, in progress), the events the turn's own events made (counted by
    ``turn.recorded``), then what the end closed: the text item left open (3), each unfinished tool (2).
    """
    message = _reply(store, row)
    meta = ((message or {}).get("metadata") or {}).get(META) or {}
    if "events" not in meta:
        return None
    shape = meta.get("output") or []
    closing = 0
    if shape and shape[-1].get("type") in ("message", "reasoning") and "status" not in shape[-1]:
        closing += 3
    closing += 2 * sum(1 for entry in shape if entry.get("type") == "mcp_call" and entry.get("status") == "in_progress")
    return 2 + int(meta["events"]) + closing


def _reply(store: Any, row: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    if not row.get("message_id"):
        return None
    try:
        reply: Dict[str, Any] = store.messages.get(row["owner"], row["message_id"])
        return reply
    except Exception:  # noqa: BLE001 - deleted from history since: no reply to show
        return None
