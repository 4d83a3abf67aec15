"""The MCP broker: the one child process of a worker that owns every MCP server connection.

Started by ``odysseus/mcp/client.py`` as ``python -I broker.py`` (a fresh, unpatched interpreter)
and never imported by the server: the official ``mcp`` SDK is asyncio/anyio, and a gevent worker
must not host an asyncio loop. This is a plain asyncio program; it speaks line-delimited JSON with
the worker over its stdin (requests) and stdout (replies and notifications), and imports nothing of
Odysseus (the worker decides everything: the argv of a sandboxed server, the caps, the timeouts).

Requests ``{"id": N, "op": ...}``:

- ``reload`` ``{servers: [spec]}``: the servers wanted now. A changed or removed server is closed
  (its calls in flight end with an error); a new one is started on first use.
- ``list_tools`` ``{server, timeout}`` -> ``{tools: [...]}``: starts the server if needed.
- ``call`` ``{server, tool, arguments, timeout, max_bytes, max_image_bytes}``: ``{progress: {...}}``
  notifications (at most ``PROGRESS_PER_SECOND``; in between the latest wins), then
  ``{result: {content: [...], is_error, truncated}}`` or an error.
- ``cancel`` ``{call: N}``: cancels that call; the SDK sends the server ``notifications/cancelled``.
- ``status`` -> ``{servers: {name: status}}``; ``test`` ``{spec, timeout}``: a fresh connection that
  initializes, lists the tools and closes -> ``{ok, tools, latency_ms}`` or ``{ok: false, error}``.

An error reply is ``{id, error: text, kind}`` (``unavailable``, ``timeout``, ``cancelled``,
``closed``, ``failed``, ``bad_request``). Notifications without an id: ``{event: "server", name,
state, error, tools?}`` whenever a server's state or tool list changes.

Each server is one task (``Conn``): start (spawn or connect, ``initialize``, ``tools/list``, all
within the start timeout), serve, and when the connection ends, mark the server unavailable with
the reason and start again after a backoff (1 s, doubling up to ``max_delay``) while it is wanted.
``notifications/tools/list_changed`` lists the tools again. stdin's end (the worker is gone) closes
every server: the SDK closes each stdin, waits, then kills the process tree.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import threading
import time
from typing import Any, Dict, List, Optional

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

PROGRESS_PER_SECOND = 20
MAX_TOOLS_LISTED = 1000
MAX_PAGES = 20
MAX_DESCRIPTION = 4000
MAX_SCHEMA_BYTES = 64 * 1024
STDERR_TAIL = 2000
MAX_REQUEST_LINE = 32 * 1024 * 1024
CLIENT_INFO = types.Implementation(name="odysseus", version="0.1.0")
GUARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stdio_guard.py")
#: a stdio line the SDK reads at most (it costs the square of its size); larger results are cut by the guard
SOFT_LINE = 4 * 1024 * 1024
#: a line the guard still parses to cut it; a larger one is answered with an error
HARD_LINE = 64 * 1024 * 1024


class Unavailable(Exception):
    """The server cannot be reached now; the message says why."""


def describe(exc: BaseException) -> str:
    """A short reason for an exception, the innermost of an exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    if isinstance(exc, PermissionError):
        return f"command not executable: {exc.filename or exc}"
    text = str(exc).strip() or type(exc).__name__
    return text[:500]


class StderrTail:
    """A pipe for a server's stderr, read by a thread that keeps only its last characters."""

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()
        self.file = os.fdopen(write_fd, "w")
        self.tail = b""
        self.ended = threading.Event()
        thread = threading.Thread(target=self._read, args=(read_fd,), daemon=True)
        thread.start()

    def _read(self, fd: int) -> None:
        try:
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return
                self.tail = (self.tail + chunk)[-STDERR_TAIL:]
        finally:
            os.close(fd)
            self.ended.set()

    async def settle(self, wait: float = 0.5) -> None:
        """Give a server that just exited a moment for its last words to arrive."""
        deadline = time.monotonic() + wait
        while not self.ended.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)

    def close_writer(self) -> None:
        """Our copy of the write end (the child has its own)."""
        try:
            self.file.close()
        except OSError:
            pass

    def last_line(self) -> str:
        """The last non-empty line the server wrote to stderr, if any."""
        lines = [line for line in self.tail.decode("utf-8", "replace").splitlines() if line.strip()]
        return lines[-1].strip()[:300] if lines else ""


def tool_entry(tool: types.Tool) -> Dict[str, Any]:
    """A listed tool as the worker gets it: name, description, input schema (bounded)."""
    schema: Any = tool.input_schema
    if not isinstance(schema, dict) or len(json.dumps(schema, default=str)) > MAX_SCHEMA_BYTES:
        schema = {"type": "object"}
    return {
        "name": str(tool.name)[:256],
        "title": (tool.title or "")[:200] if isinstance(getattr(tool, "title", None), str) else "",
        "description": (tool.description or "")[:MAX_DESCRIPTION],
        "input_schema": schema,
    }


async def list_all_tools(session: ClientSession) -> List[Dict[str, Any]]:
    """Every tool the server lists (all pages, bounded)."""
    tools: List[Dict[str, Any]] = []
    cursor: Optional[str] = None
    for _ in range(MAX_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        result = await session.list_tools(params=params)
        tools.extend(tool_entry(tool) for tool in result.tools)
        cursor = result.next_cursor
        if not cursor or len(tools) >= MAX_TOOLS_LISTED:
            break
    return tools[:MAX_TOOLS_LISTED]


def transport(spec: Dict[str, Any], stderr: Optional[StderrTail]) -> Any:
    """The SDK transport of a spec: stdio for a command, Streamable HTTP for a url."""
    if spec.get("command"):
        # through the guard (stdio_guard.py): no line the SDK reads is larger than SOFT_LINE
        caps = [str(SOFT_LINE), str(HARD_LINE), str(int(spec.get("max_bytes") or 1 << 20))]
        params = StdioServerParameters(
            command=sys.executable,
            args=["-I", GUARD, *caps, "--", spec["command"], *(spec.get("args") or [])],
            env=dict(spec.get("env") or {}),
            cwd=spec.get("cwd") or None,
            encoding_error_handler="replace",
        )
        return stdio_client(params, errlog=stderr.file if stderr else sys.stderr)
    return _http(spec)


class _http:
    """``streamable_http_client`` with its own httpx client (headers, timeouts) closed after it."""

    def __init__(self, spec: Dict[str, Any]):
        self.spec = spec
        self.client: Any = None
        self.inner: Any = None

    async def __aenter__(self) -> Any:
        import httpx2

        timeout = httpx2.Timeout(float(self.spec.get("start_timeout") or 20), read=None)
        self.client = create_mcp_http_client(headers=dict(self.spec.get("headers") or {}), timeout=timeout)
        await self.client.__aenter__()
        self.inner = streamable_http_client(self.spec["url"], http_client=self.client)
        try:
            return await self.inner.__aenter__()
        except BaseException:
            await self.client.__aexit__(None, None, None)
            raise

    async def __aexit__(self, *exc: Any) -> None:
        try:
            with anyio.move_on_after(3, shield=True):
                await self.inner.__aexit__(*exc)
        finally:
            with anyio.move_on_after(2, shield=True):
                await self.client.__aexit__(None, None, None)


def content_blocks(result: types.CallToolResult, max_bytes: int, max_image_bytes: int) -> Dict[str, Any]:
    """A tool result cut to the worker's caps: text up to ``max_bytes`` in all, images up to theirs."""
    out: List[Dict[str, Any]] = []
    left = max_bytes
    truncated = False

    def text(value: str) -> None:
        nonlocal left, truncated
        data = value.encode("utf-8", "replace")
        if len(data) > left:
            truncated = True
            data = data[: max(left, 0)]
        left -= len(data)
        if data:
            out.append({"type": "text", "text": data.decode("utf-8", "ignore")})

    for block in result.content:
        if isinstance(block, types.TextContent):
            text(block.text)
        elif isinstance(block, types.ImageContent):
            size = len(block.data) * 3 // 4
            if size > max_image_bytes:
                text(f"[an image of {size} bytes was left out: larger than {max_image_bytes} bytes]")
            else:
                out.append({"type": "image", "data": block.data, "mime_type": block.mime_type})
        elif isinstance(block, types.AudioContent):
            text("[audio content is not shown]")
        elif isinstance(block, types.ResourceLink):
            text(f"[resource: {block.uri}{' ' + block.name if block.name else ''}]")
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, types.TextResourceContents):
                text(f"[resource {resource.uri}]\n{resource.text}")
            else:
                text(f"[binary resource {resource.uri}]")
        else:
            text(f"[{getattr(block, 'type', 'unknown')} content is not shown]")
    if not out and result.structured_content is not None:
        text(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return {"content": out, "is_error": bool(result.is_error), "truncated": truncated}


class Conn:
    """One server: its connection task, state and tools (see the module docstring)."""

    def __init__(self, broker: "Broker", spec: Dict[str, Any]):
        self.broker, self.spec, self.name = broker, spec, spec["name"]
        self.state = "idle"
        self.error: Optional[str] = None
        self.tools: Optional[List[Dict[str, Any]]] = None
        self.session: Optional[ClientSession] = None
        self.waiters: List["asyncio.Future[ClientSession]"] = []
        self.lost = asyncio.Event()
        self.lost_reason = ""
        self.closing = False
        self.task: Optional["asyncio.Task[None]"] = None
        self.restarts = 0
        self.retry_at: Optional[float] = None
        self.stderr: Optional[StderrTail] = None
        self.background: set = set()

    def status(self, with_tools: bool = False) -> Dict[str, Any]:
        """The server's state as the worker reports it (with its tool list, when asked)."""
        status: Dict[str, Any] = {
            "name": self.name,
            "state": self.state,
            "error": self.error,
            "tool_count": None if self.tools is None else len(self.tools),
            "restarts": self.restarts,
            "retry_at": self.retry_at,
        }
        if with_tools:
            status["tools"] = self.tools
        return status

    def announce(self, with_tools: bool = False) -> None:
        self.broker.emit({"event": "server", **self.status(with_tools)})

    async def session_for(self, timeout: float) -> ClientSession:
        """The live session, starting the server on first use; Unavailable says why not."""
        if self.task is None:
            self.task = asyncio.create_task(self._run())
        if self.session is not None:
            return self.session
        if self.state == "unavailable":
            raise Unavailable(self.error or "unavailable")
        future: "asyncio.Future[ClientSession]" = asyncio.get_running_loop().create_future()
        self.waiters.append(future)
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except asyncio.TimeoutError:
            raise Unavailable(f"it did not start within {timeout:g} s") from None
        finally:
            if future in self.waiters:
                self.waiters.remove(future)

    def _settle(self, session: Optional[ClientSession], error: Optional[str]) -> None:
        waiters, self.waiters = self.waiters, []
        for future in waiters:
            if future.done():
                continue
            if session is not None:
                future.set_result(session)
            else:
                future.set_exception(Unavailable(error or "unavailable"))

    async def _run(self) -> None:
        delay = 1.0
        max_delay = float(self.spec.get("max_delay") or 60)
        while not self.closing:
            self.state, self.error, self.retry_at = "starting", None, None
            self.announce()
            error = await self._serve_once()
            self.session = None
            if self.closing:
                break
            self.state, self.error = "unavailable", error
            self.retry_at = time.time() + delay
            self._settle(None, error)
            self.announce(with_tools=True)
            await asyncio.sleep(delay)
            delay = min(delay * 2, max_delay)
            self.restarts += 1
        self.state = "closed"

    async def _serve_once(self) -> str:
        """One connection, from spawn to its end; the reason it ended (or failed to start)."""
        self.lost = asyncio.Event()
        self.lost_reason = ""
        start_timeout = float(self.spec.get("start_timeout") or 20)
        phase = "start"
        self.stderr = StderrTail() if self.spec.get("command") else None
        try:
            async with transport(self.spec, self.stderr) as streams:
                if self.stderr is not None:
                    self.stderr.close_writer()
                read, write = streams[0], streams[1]
                forward, receive = anyio.create_memory_object_stream[Any](16)
                async with anyio.create_task_group() as group:
                    group.start_soon(self._pump, read, forward)
                    try:
                        async with ClientSession(
                            receive, write, message_handler=self._on_message, client_info=CLIENT_INFO
                        ) as session:
                            with anyio.fail_after(start_timeout):
                                phase = "initialize"
                                await session.initialize()
                                phase = "tools/list"
                                tools = await list_all_tools(session)
                            phase = "serve"
                            self.session, self.tools = session, tools
                            self.state = "ready"
                            self._settle(session, None)
                            self.announce(with_tools=True)
                            await self.lost.wait()
                    finally:
                        group.cancel_scope.cancel()
        except BaseException as exc:  # noqa: BLE001 - every way a connection ends is a reason
            if isinstance(exc, asyncio.CancelledError) and self.closing:
                raise
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            failure: Optional[BaseException] = exc
        else:
            failure = None
        finally:
            if self.stderr is not None:
                self.stderr.close_writer()
        if self.stderr is not None:
            await self.stderr.settle()
        return self._reason(phase, failure, start_timeout)

    def _reason(self, phase: str, exc: Optional[BaseException], start_timeout: float) -> str:
        said = self.stderr.last_line() if self.stderr is not None else ""
        if exc is not None and isinstance(_leaf(exc), TimeoutError) and phase in ("initialize", "tools/list"):
            reason = f"it did not answer {phase} within {start_timeout:g} s"
        elif exc is not None and phase != "serve":
            reason = describe(exc)
            if reason == "Connection closed":
                reason = f"it exited before answering {phase}" if phase != "start" else "it exited at once"
        else:
            reason = self.lost_reason or "the server closed the connection"
        if said and said not in reason:
            reason = f"{reason} (it said: {said})"
        return reason[:600]

    async def _pump(self, read: Any, forward: Any) -> None:
        """Pass the transport's messages to the session; its end (the process exited) ends the connection."""
        try:
            async with forward:
                async for item in read:
                    await forward.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            pass
        finally:
            if not self.lost_reason:
                self.lost_reason = "the server closed the connection"
            self.lost.set()

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            task = asyncio.create_task(self._relist())
            self.background.add(task)
            task.add_done_callback(self.background.discard)

    async def _relist(self) -> None:
        session = self.session
        if session is None:
            return
        try:
            with anyio.fail_after(float(self.spec.get("start_timeout") or 20)):
                tools = await list_all_tools(session)
        except Exception:  # noqa: BLE001 - the old list stays; the next change tries again
            return
        if session is self.session:
            self.tools = tools
            self.announce(with_tools=True)

    def connection_failed(self, reason: str) -> None:
        """A call saw the transport fail: end this connection (it is started again after the backoff)."""
        if self.session is not None and not self.lost.is_set():
            self.lost_reason = reason
            self.lost.set()

    async def close(self) -> None:
        """End the connection for good (its calls get an error), waiting boundedly for the process to go."""
        self.closing = True
        self._settle(None, "the server was removed or changed")
        self.lost_reason = "the server was removed or changed"
        self.lost.set()  # a connected server: leave serving, then the SDK's bounded shutdown
        if self.task is None:
            return
        if self.session is None:  # starting (a hung initialize) or waiting out a backoff: stop now
            self.task.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(self.task), 8)
        except (asyncio.TimeoutError, asyncio.CancelledError, Exception):  # noqa: BLE001
            self.task.cancel()


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class Broker:
    """The request loop: one task per request, replies written in order of completion."""

    def __init__(self, writer: asyncio.StreamWriter):
        self.writer = writer
        self.conns: Dict[str, Conn] = {}
        self.calls: Dict[Any, anyio.CancelScope] = {}
        self.tasks: set = set()

    def emit(self, message: Dict[str, Any]) -> None:
        """Write one line to the worker (buffered; the writer task drains it)."""
        try:
            self.writer.write(json.dumps(message, ensure_ascii=False, default=str).encode("utf-8") + b"\n")
        except (ConnectionError, RuntimeError):
            pass

    def reply(self, request_id: Any, **fields: Any) -> None:
        self.emit({"id": request_id, **fields})

    def handle(self, request: Dict[str, Any]) -> None:
        """Start the task answering one request."""
        if request.get("op") == "cancel":
            scope = self.calls.get(request.get("call"))
            if scope is not None:
                scope.cancel()
            self.reply(request.get("id"), result={"cancelled": scope is not None})
            return
        task = asyncio.create_task(self._answer(request))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _answer(self, request: Dict[str, Any]) -> None:
        request_id = request.get("id")
        op = request.get("op")
        try:
            if op == "reload":
                self.reply(request_id, result=await self.reload(request.get("servers") or []))
            elif op == "status":
                self.reply(request_id, result={"servers": {n: c.status() for n, c in self.conns.items()}})
            elif op == "list_tools":
                conn = self._conn(request)
                await conn.session_for(float(request.get("timeout") or 20))
                self.reply(request_id, result={"tools": conn.tools or []})
            elif op == "call":
                await self.call(request)
            elif op == "test":
                self.reply(request_id, result=await self.test(request["spec"], float(request.get("timeout") or 20)))
            else:
                self.reply(request_id, error=f"unknown op {op!r}", kind="bad_request")
        except Unavailable as exc:
            self.reply(request_id, error=str(exc), kind="unavailable")
        except Exception as exc:  # noqa: BLE001 - any failure is an answer, never a dead broker
            self.reply(request_id, error=describe(exc), kind="failed")

    def _conn(self, request: Dict[str, Any]) -> Conn:
        conn = self.conns.get(str(request.get("server")))
        if conn is None:
            raise Unavailable(f"no MCP server named {request.get('server')!r}")
        return conn

    async def reload(self, specs: List[Dict[str, Any]]) -> Dict[str, Any]:
        wanted = {spec["name"]: spec for spec in specs}
        closing = []
        for name, conn in list(self.conns.items()):
            if wanted.get(name) != conn.spec:
                closing.append(conn)
                del self.conns[name]
        for name, spec in wanted.items():
            if name not in self.conns:
                self.conns[name] = Conn(self, spec)
        for conn in closing:
            task = asyncio.create_task(conn.close())
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        return {"servers": sorted(self.conns)}

    async def call(self, request: Dict[str, Any]) -> None:
        request_id = request.get("id")
        conn = self._conn(request)
        timeout = float(request.get("timeout") or 60)
        started = time.monotonic()
        session = await conn.session_for(min(timeout, float(conn.spec.get("start_timeout") or 20)))
        throttle = Throttle(lambda data: self.reply(request_id, progress=data))
        scope = anyio.CancelScope()
        self.calls[request_id] = scope
        result: Any = None
        try:
            with scope:
                with anyio.move_on_after(max(0.0, timeout - (time.monotonic() - started))) as deadline:
                    result = await session.call_tool(
                        str(request.get("tool")),
                        request.get("arguments") or {},
                        progress_callback=throttle.progress,
                    )
        except Exception as exc:  # noqa: BLE001
            reason = describe(exc)
            if "Connection closed" in reason or conn.lost.is_set():
                reason = conn.lost_reason or "the server closed the connection"
                conn.connection_failed(reason)
                self.reply(request_id, error=f"the MCP server stopped during the call: {reason}", kind="closed")
            else:
                self.reply(request_id, error=reason, kind="failed")
            return
        finally:
            self.calls.pop(request_id, None)
        throttle.flush()
        if scope.cancelled_caught:
            self.reply(request_id, error="the call was cancelled", kind="cancelled")
        elif deadline.cancelled_caught:
            self.reply(request_id, error=f"the call took longer than {timeout:g} s and was cancelled", kind="timeout")
        elif not isinstance(result, types.CallToolResult):
            self.reply(request_id, error="the server answered with something other than a tool result", kind="failed")
        else:
            caps = int(request.get("max_bytes") or 1 << 20), int(request.get("max_image_bytes") or 10 << 20)
            self.reply(request_id, result=content_blocks(result, *caps))

    async def test(self, spec: Dict[str, Any], timeout: float) -> Dict[str, Any]:
        """Connect afresh, initialize, list the tools, close; the answer of the admin's Test button."""
        started = time.monotonic()
        stderr = StderrTail() if spec.get("command") else None
        phase = "start"
        try:
            with anyio.fail_after(timeout):
                async with transport(spec, stderr) as streams:
                    if stderr is not None:
                        stderr.close_writer()
                    async with ClientSession(streams[0], streams[1], client_info=CLIENT_INFO) as session:
                        phase = "initialize"
                        await session.initialize()
                        phase = "tools/list"
                        tools = await list_all_tools(session)
                        latency = round((time.monotonic() - started) * 1000, 1)
            return {"ok": True, "tools": tools, "latency_ms": latency}
        except BaseException as exc:  # noqa: BLE001
            if isinstance(exc, (KeyboardInterrupt, SystemExit, asyncio.CancelledError)):
                raise
            if stderr is not None:
                await stderr.settle()
            said = stderr.last_line() if stderr is not None else ""
            if isinstance(_leaf(exc), TimeoutError):
                error = f"it did not answer {phase} within {timeout:g} s" if phase != "start" else "timed out"
            else:
                error = describe(exc)
                if error == "Connection closed":
                    error = f"it exited before answering {phase}"
            if said and said not in error:
                error = f"{error} (it said: {said})"
            return {"ok": False, "error": error[:600]}
        finally:
            if stderr is not None:
                stderr.close_writer()

    async def close(self) -> None:
        """Close every server (bounded), for the broker's end."""
        conns = list(self.conns.values())
        self.conns.clear()
        await asyncio.gather(*(conn.close() for conn in conns), return_exceptions=True)


class Throttle:
    """Progress notifications to the worker: at most ``PROGRESS_PER_SECOND``, the latest kept in between."""

    def __init__(self, send: Any):
        self.send = send
        self.last = 0.0
        self.pending: Optional[Dict[str, Any]] = None

    async def progress(self, progress: float, total: Optional[float], message: Optional[str]) -> None:
        data = {"progress": progress, "total": total, "message": (message or "")[:500] or None}
        now = time.monotonic()
        if now - self.last >= 1 / PROGRESS_PER_SECOND:
            self.last, self.pending = now, None
            self.send(data)
        else:
            self.pending = data

    def flush(self) -> None:
        if self.pending is not None:
            self.send(self.pending)
            self.pending = None


async def main() -> None:
    """Read requests until stdin ends, then close every server."""
    loop = asyncio.get_running_loop()
    out_fd = os.dup(1)
    os.dup2(2, 1)  # anything printed by accident goes to stderr, never into the protocol
    reader = asyncio.StreamReader(limit=MAX_REQUEST_LINE)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    transport_, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(out_fd, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(transport_, protocol, None, loop)
    broker = Broker(writer)
    broker.emit({"event": "ready", "pid": os.getpid()})
    reading = asyncio.current_task()
    assert reading is not None
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # close the servers, then end
        loop.add_signal_handler(signum, reading.cancel)
    try:
        while True:
            try:
                line = await reader.readline()
            except ValueError:  # a line over the limit: skip to its end
                await reader.readuntil(b"\n")
                continue
            if not line:
                break
            try:
                request = json.loads(line)
            except ValueError:
                continue
            if isinstance(request, dict):
                broker.handle(request)
                await writer.drain()
    except asyncio.CancelledError:
        pass
    finally:
        await broker.close()
        writer.close()


if __name__ == "__main__":
    logging.basicConfig(level=logging.CRITICAL)  # a server's malformed lines must not flood the worker's log
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
