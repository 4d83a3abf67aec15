"""One view of a run for every reader: stream_status, the agent runs list, cancel and /api/agent/chat."""

from __future__ import annotations

from typing import Any, Dict, Optional

from .follow import durable_available
from .run import Run

FIELDS = (
    "run_id",
    "session_id",
    "status",
    "mode",
    "model",
    "stop_reason",
    "created_at",
    "updated_at",
    "finished_at",
    "event_count",
    "last_event_type",
    "error",
    "message_id",
)


def run_view(row: Optional[Dict[str, Any]], live: Optional[Run]) -> Dict[str, Any]:
    """The run's state: the live run's fields win over the row's; never any message text.

    ``resumable``/``attachable``: a client can follow it by cursor now (memory log held, or
    the durable log still inside the replay window).
    """
    view = {k: (row or {}).get(k) for k in FIELDS}
    if live is not None:
        summary = live.summary()
        view.update({k: summary[k] for k in FIELDS if k in summary})
        view["message_id"] = live.message_id if live.message_id is not None else view.get("message_id")
    view["detached"] = True
    followable = (live is not None and not live.log.released) or durable_available(row)
    view["resumable"] = view["attachable"] = bool(followable)
    return view
