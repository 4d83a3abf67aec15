"""The worker's side of the MCP broker (``broker.py``): one child process per worker, one reader.

Invariants:

- The broker is started on first use with the unpatched interpreter (``python -I broker.py``):
  its asyncio loop and the SDK never run in this process. Its stdin is our only handle on it; when
  this process ends, however it ends, the broker reads EOF and closes every server.
- One reader (a greenlet under gevent's monkey patch, where the pipe is cooperative; a thread
  otherwise) reads the broker's lines and hands each to the queue of the request it answers, or
  applies an unsolicited notification (a server's state and tools). A line longer than
  ``MAX_LINE`` is dropped, so a flood costs the reader time, never the hub or memory.
- Every wait has a timeout. A request whose answer does not come in time ends with an error
  (a call is also cancelled in the broker). A cancel token wakes its request at once.
- A broker that dies fails every request in flight (``McpError`` kind ``closed``); the next
  request starts a new one (after a backoff when they keep dying) and sends it the servers again.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..cancel import CancelToken
from ..errors import OdysseusError

log = logging.getLogger(__name__)

BROKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "broker.py")
MAX_LINE = 48 * 1024 * 1024
_CANCELLED = {"error": "the call was stopped", "kind": "cancelled"}


class McpError(OdysseusError):
    """An MCP request failed: ``kind`` is unavailable, timeout, cancelled, closed, failed or bad_request."""

    status = 502

    def __init__(self, message: str, kind: str = "failed"):
        super().__init__(message)
        self.kind = kind


class BrokerClient:
    """The broker child process of this worker, its reader and the requests waiting for answers."""

    def __init__(
        self,
        specs: Callable[[], List[Dict[str, Any]]],
        on_event: Callable[[Dict[str, Any]], None] = lambda event: None,
        max_delay: float = 60.0,
    ):
        self._specs = specs
        self._on_event = on_event
        self._max_delay = max_delay
        self._proc: Optional[subprocess.Popen] = None
        #: request id -> (the broker it was sent to, the queue its answers go to)
        self._pending: Dict[int, Tuple[subprocess.Popen, "queue.Queue[Dict[str, Any]]"]] = {}
        self._ids = itertools.count(1)
        self._lock = threading.RLock()  # one writer at a time; guards _proc (re-entered: _specs may reload)
        self._closed = False
        self._deaths = 0
        self._died_at = 0.0
        self.pid: Optional[int] = None

    # ------------------------------------------------------------------ the process
    def _ensure(self) -> subprocess.Popen:
        """The running broker, started (and sent the servers) when there is none."""
        with self._lock:
            if self._closed:
                raise McpError("MCP is shut down", "closed")
            proc = self._proc
            if proc is not None and proc.poll() is None:
                return proc
            if self._deaths and time.monotonic() - self._died_at < self._backoff():
                raise McpError("the MCP broker stopped and is restarting; try again shortly", "unavailable")
            proc = subprocess.Popen(
                [sys.executable, "-I", BROKER],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                close_fds=True,
                start_new_session=True,  # a terminal's Ctrl-C is for us; we end it by closing its stdin
            )
            self._proc, self.pid = proc, proc.pid
            reader = threading.Thread(target=self._read, args=(proc,), name="mcp-broker-reader", daemon=True)
            reader.start()
            # the servers first, before any request another greenlet sends (it waits for this lock)
            self._write(proc, {"id": 0, "op": "reload", "servers": self._specs()})
        return proc

    def _backoff(self) -> float:
        return min(self._max_delay, 0.5 * (2 ** min(self._deaths - 1, 10)))

    def _send(self, proc: subprocess.Popen, message: Dict[str, Any]) -> None:
        with self._lock:
            self._write(proc, message)

    def _write(self, proc: subprocess.Popen, message: Dict[str, Any]) -> None:
        """One line to the broker (the caller holds ``_lock``)."""
        line = json.dumps(message, ensure_ascii=False, default=str).encode("utf-8") + b"\n"
        try:
            assert proc.stdin is not None
            proc.stdin.write(line)
            proc.stdin.flush()
        except (OSError, ValueError) as exc:  # the broker is gone (its reader fails the requests)
            raise McpError(f"the MCP broker is not running ({type(exc).__name__})", "closed") from None

    def _read(self, proc: subprocess.Popen) -> None:
        """The reader: every line of the broker to its request's queue or the event handler."""
        stdout = proc.stdout
        assert stdout is not None
        try:
            while True:
                line = stdout.readline(MAX_LINE)
                if not line:
                    break
                if not line.endswith(b"\n"):  # longer than MAX_LINE: drop it to its end
                    while line and not line.endswith(b"\n"):
                        line = stdout.readline(MAX_LINE)
                    continue
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if isinstance(message, dict):
                    self._dispatch(message)
        except (OSError, ValueError):
            pass
        finally:
            self._gone(proc)

    def _dispatch(self, message: Dict[str, Any]) -> None:
        if "id" in message:
            waiting = self._pending.get(message["id"])
            if waiting is not None:
                waiting[1].put(message)
            return
        try:
            self._on_event(message)
        except Exception:  # noqa: BLE001 - a handler's bug must not stop the reader
            log.exception("MCP broker event handler failed")

    def _gone(self, proc: subprocess.Popen) -> None:
        """The broker ended: fail what waited on it; the next request starts another."""
        with self._lock:
            if self._proc is proc:
                self._proc = None
                if not self._closed:
                    self._deaths += 1
                    self._died_at = time.monotonic()
        for sent_to, waiting in list(self._pending.values()):
            if sent_to is proc:
                waiting.put({"error": "the MCP broker stopped", "kind": "closed"})
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
        if not self._closed:
            self._on_event({"event": "broker_stopped"})

    # ------------------------------------------------------------------ requests
    def request(
        self,
        op: str,
        wait: float,
        *,
        cancel: Optional[CancelToken] = None,
        on_progress: Optional[Callable[[Dict[str, Any]], None]] = None,
        **fields: Any,
    ) -> Dict[str, Any]:
        """Send one request and wait (at most ``wait`` s) for its result; McpError otherwise."""
        proc = self._ensure()
        request_id = next(self._ids)
        answers: "queue.Queue[Dict[str, Any]]" = queue.Queue()
        self._pending[request_id] = (proc, answers)
        unregister = cancel.on_cancel(lambda: answers.put(_CANCELLED)) if cancel is not None else (lambda: None)
        deadline = time.monotonic() + wait
        try:
            self._send(proc, {"id": request_id, "op": op, **fields})
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    if op == "call":
                        self._cancel_remote(proc, request_id)
                    raise McpError(f"no answer from the MCP broker within {wait:g} s", "timeout")
                try:
                    answer = answers.get(timeout=left)
                except queue.Empty:
                    continue
                if answer is _CANCELLED and op == "call":
                    self._cancel_remote(proc, request_id)
                if "progress" in answer:
                    if on_progress is not None:
                        on_progress(answer["progress"])
                    continue
                if "error" in answer:
                    raise McpError(str(answer["error"]), str(answer.get("kind") or "failed"))
                result = answer.get("result")
                return result if isinstance(result, dict) else {}
        finally:
            self._pending.pop(request_id, None)
            unregister()

    def _cancel_remote(self, proc: subprocess.Popen, request_id: int) -> None:
        try:
            self._send(proc, {"id": next(self._ids), "op": "cancel", "call": request_id})
        except McpError:
            pass

    def reload(self) -> None:
        """Send the servers wanted now to a running broker (a new one gets them when it starts)."""
        with self._lock:
            proc = self._proc if self._proc is not None and self._proc.poll() is None else None
        if proc is not None:
            try:
                self._send(proc, {"id": 0, "op": "reload", "servers": self._specs()})
            except McpError:
                pass

    @property
    def running(self) -> bool:
        """True while a broker process is alive."""
        proc = self._proc
        return proc is not None and proc.poll() is None

    def close(self, timeout: float = 10.0) -> None:
        """End the broker: its stdin closes, it closes every server (bounded), then it exits."""
        with self._lock:
            self._closed = True
            proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            assert proc.stdin is not None
            proc.stdin.close()
        except (OSError, ValueError):
            pass
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
