"""Running one tool call beside the turn, so the turn can report progress and enforce a time limit.

The tool runs in its own thread (a greenlet under gevent's monkey patch) with a child
cancel token linked to the run's. The turn waits on a queue: it yields ``tool_progress``
every ``progress_interval`` once the tool has run for that long (and one at once for each
structured report, an MCP server's progress notification), cancels the child token
at the time limit (a code tool then kills its process group) and returns an error
result the model sees. A stopped run cancels the child too, and the turn raises
``Cancelled`` so the run engine ends the run as stopped.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from typing import Generator, List, Optional

from ..cancel import CancelToken, Cancelled
from ..events import TOOL_PROGRESS, Event
from ..tools.registry import Tool, ToolContext, ToolResult, execute

#: Seconds a tool may take to give up after its time limit before we stop waiting for it.
ABANDON_GRACE = 2.0


def progress_event(tool: str, report: dict, elapsed: float, round_no: int, call_id: Optional[str]) -> dict:
    """A ``tool_progress`` from a structured report: ``progress`` and ``total`` as sent, a message to show."""
    progress, total = report.get("progress"), report.get("total")
    message = str(report.get("message") or "")[:500]
    if not message and isinstance(progress, (int, float)):
        message = f"{progress:g} of {total:g}" if isinstance(total, (int, float)) and total else f"{progress:g}"
    data = {"tool": tool, "message": message or "working", "elapsed": elapsed, "round": round_no}
    if isinstance(progress, (int, float)):
        data["progress"] = progress
    if isinstance(total, (int, float)):
        data["total"] = total
    if call_id:
        data["call_id"] = call_id
    return data


def run_tool(
    tool: Tool,
    args: dict,
    ctx: ToolContext,
    run_cancel: CancelToken,
    *,
    timeout: float,
    progress_interval: float,
    round_no: int,
    call_id: Optional[str] = None,
) -> Generator[Event, None, ToolResult]:
    """Yield ``tool_progress`` events while ``tool`` runs; the generator's return value is the ToolResult."""
    child = CancelToken()
    lines: "queue.Queue" = queue.Queue()

    def stop() -> None:
        child.cancel(run_cancel.reason or "stopped")
        lines.put(None)  # wake the waiter now, not at its next progress interval

    unlink = run_cancel.on_cancel(stop)
    done = threading.Event()
    box: List[Optional[ToolResult]] = [None]
    # every field of the run's context (workspace, memories, ...), with this call's cancel token and progress
    tool_ctx = dataclasses.replace(ctx, cancel=child, progress=lines.put, report=lines.put)

    def work() -> None:
        try:
            box[0] = execute(tool, args, tool_ctx)
        finally:
            done.set()
            lines.put(None)  # wake the waiter

    started = time.monotonic()
    worker = threading.Thread(target=work, name=f"tool-{tool.name}", daemon=True)
    worker.start()
    pending: List[str] = []
    next_progress = started + progress_interval
    try:
        while not done.is_set():
            now = time.monotonic()
            if run_cancel.cancelled:
                done.wait(ABANDON_GRACE)
                raise Cancelled(run_cancel.reason or "stopped")
            if now - started >= timeout:
                child.cancel("timeout")
                done.wait(ABANDON_GRACE)
                return ToolResult(
                    f"Error: the tool timed out after {timeout:g} s and was stopped.",
                    exit_code=124,
                    meta={"error": "timeout", "timeout": timeout},
                )
            wait = max(0.01, min(next_progress, started + timeout) - now)
            reports: List[dict] = []
            try:
                line = lines.get(timeout=wait)
                while True:  # this and what else has arrived
                    if isinstance(line, dict):
                        reports.append(line)
                    elif line is not None:
                        pending.append(line)
                    line = lines.get_nowait()
            except queue.Empty:
                pass
            for report in reports:  # a structured report (MCP progress) is an event of its own, at once
                elapsed = round(time.monotonic() - started, 1)
                yield Event(TOOL_PROGRESS, progress_event(tool.name, report, elapsed, round_no, call_id))
            now = time.monotonic()
            if now >= next_progress and not done.is_set():
                elapsed = round(now - started, 1)
                message = "\n".join(pending[-20:])[-2000:] if pending else f"running ({elapsed:g} s)"
                pending = []
                next_progress = now + progress_interval
                data = {"tool": tool.name, "message": message, "elapsed": elapsed, "round": round_no}
                if call_id:
                    data["call_id"] = call_id
                yield Event(TOOL_PROGRESS, data)
        if run_cancel.cancelled:  # the tool ended because the run was stopped
            raise Cancelled(run_cancel.reason or "stopped")
        return box[0] or ToolResult("Error: the tool produced no result", exit_code=1)
    finally:
        unlink()
