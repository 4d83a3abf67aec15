"""Run one process with bounded output and a hard end: the reader under code tools.

Invariants:

- Output (stdout and stderr on one pipe) is read as bytes in chunks from a non-blocking
  pipe; at most ``max_bytes`` are kept, the rest is read and dropped (counted), so a
  process printing gigabytes without a newline costs a bounded amount of memory.
- Waiting uses ``select.poll`` with a short timeout: cooperative under gevent's monkey
  patch (the server's hub keeps serving), a plain blocking wait in a thread otherwise.
- Reading stops at the deadline, on cancel, or shortly after the process exits even if
  something it started still holds the pipe open; then the whole process group is
  killed (in the sandbox that is the outer bwrap, whose death takes the PID namespace,
  and so everything started inside, with it).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence

from ..cancel import CancelToken

CHUNK = 64 * 1024
POLL_MS = 100
#: seconds we keep reading after the process exited (a grandchild may hold the pipe)
DRAIN_GRACE = 0.5
#: the longest progress line, and the longest unterminated line buffered for progress
LINE_MAX = 2000


@dataclass
class ProcessResult:
    """How a bounded run ended."""

    exit_code: Optional[int]
    output: bytes
    dropped: int
    reason: str = ""  # "", "timeout" or the cancel reason


class _Lines:
    """Splits kept output into progress lines without buffering an unbounded line."""

    def __init__(self, progress: Callable[[str], None]):
        self.progress = progress
        self.partial = b""

    def feed(self, data: bytes) -> None:
        self.partial += data
        *lines, self.partial = self.partial.split(b"\n")
        for line in lines:
            self.progress(line[:LINE_MAX].decode("utf-8", "replace"))
        if len(self.partial) > LINE_MAX:
            self.progress(self.partial[:LINE_MAX].decode("utf-8", "replace"))
            self.partial = b""

    def flush(self) -> None:
        if self.partial:
            self.progress(self.partial[:LINE_MAX].decode("utf-8", "replace"))
            self.partial = b""


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group the process leads (no-op when it is gone)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def run_bounded(
    argv: List[str],
    *,
    cancel: CancelToken,
    max_bytes: int,
    timeout: float,
    progress: Callable[[str], None] = lambda line: None,
    stdin=None,
    env: Optional[dict] = None,
    cwd: Optional[str] = None,
    pass_fds: Sequence[int] = (),
) -> ProcessResult:
    """Run ``argv`` in a new session; return its exit code and at most ``max_bytes`` of output.

    ``pass_fds`` reach the process; they are closed here in every case (once it has started, or not).
    """
    try:
        cancel.raise_if_cancelled()
        read_fd, write_fd = os.pipe()
    except BaseException:
        for fd in pass_fds:
            os.close(fd)
        raise
    try:
        proc = subprocess.Popen(
            argv,
            stdin=stdin if stdin is not None else subprocess.DEVNULL,
            stdout=write_fd,
            stderr=write_fd,
            env=env,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
            pass_fds=tuple(pass_fds),
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
        for fd in pass_fds:
            os.close(fd)
    os.set_blocking(read_fd, False)
    unregister = cancel.on_cancel(lambda: kill_group(proc))
    kept: List[bytes] = []
    size = dropped = 0
    reason = ""
    lines = _Lines(progress)
    poller = select.poll()
    poller.register(read_fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    deadline = time.monotonic() + timeout
    exited_at: Optional[float] = None
    try:
        while True:
            if cancel.cancelled:
                reason = cancel.reason or "stopped"
                break
            now = time.monotonic()
            if now >= deadline:
                reason = "timeout"
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            elif exited_at is not None and now - exited_at > DRAIN_GRACE:
                break  # the process is gone; whoever still holds the pipe is killed below
            if not poller.poll(POLL_MS):
                continue
            try:
                chunk = os.read(read_fd, CHUNK)
            except BlockingIOError:
                continue
            if not chunk:
                break  # EOF: every writer is gone
            room = max(0, max_bytes - size)
            if room:
                kept.append(chunk[:room])
                lines.feed(chunk[:room])
                size += min(room, len(chunk))
            dropped += max(0, len(chunk) - room)
    finally:
        unregister()
        kill_group(proc)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not take this long
            pass
        os.close(read_fd)
    lines.flush()
    code = proc.returncode if not reason else None
    return ProcessResult(code, b"".join(kept), dropped, reason)
