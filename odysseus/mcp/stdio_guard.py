"""The guard between a stdio MCP server and the broker: every line the SDK reads is small.

Run by the broker (``broker.py``), never imported: ``python -I stdio_guard.py SOFT HARD TEXT --
COMMAND ARGS...``. The server inherits our stdin (the broker's requests reach it untouched) and our
stderr; its stdout comes through here, line by line:

- a line of at most SOFT bytes passes as it is;
- a longer one of at most HARD bytes is parsed; a JSON-RPC result gets its text cut to TEXT bytes
  in all, larger images and blobs replaced by a note and an oversized ``structuredContent``
  dropped, and is written again (a note says so); what still does not fit is answered as below;
- a line past HARD bytes is read to its end without being kept, and its request (the id found at
  its start or end) is answered with a JSON-RPC error giving its size.

Why: the SDK's stdio reader re-joins a line's chunks for every chunk, so its cost grows with the
square of the line (a 50 MB result held the broker's loop, and so every other server, for over two
minutes). Here a line costs linear time, in this process.

The guard and the server die with the broker (``PR_SET_PDEATHSIG``), so a broker killed outright
leaves no server behind; the guard exits with the server's exit code when its stdout ends.
"""

import ctypes
import json
import os
import re
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1
CHUNK = 1 << 16
_HEAD_ID = re.compile(rb'^\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,20})')
_TAIL_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,20})\s*\}\s*$')


def die_with_parent() -> None:
    """Ask the kernel to kill this process when the one that started it ends."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def request_id(head: bytes, tail: bytes):
    """The id of a JSON-RPC response, from the first or last bytes of its line; None if not found."""
    for pattern, text in ((_HEAD_ID, head), (_TAIL_ID, tail)):
        found = pattern.search(text)
        if found:
            try:
                return json.loads(found.group(1))
            except ValueError:
                return None
    return None


def too_large(rid, size: int) -> bytes:
    """The error answering a request whose response was too large to pass."""
    message = f"the MCP server's answer was {size} bytes, more than Odysseus accepts"
    return json.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": message}}).encode() + b"\n"


def shrink(line: bytes, soft: int, text_cap: int):
    """A large JSON-RPC result cut to size (text, images, structured content), or None."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    result = message.get("result") if isinstance(message, dict) else None
    if not isinstance(result, dict):
        return None
    left = text_cap
    cut = 0
    content = result.get("content")
    if not isinstance(content, list):
        content = result["content"] = []
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("text"), str):
            data = block["text"].encode("utf-8", "replace")
            if len(data) > left:
                cut += len(data) - max(left, 0)
                block["text"] = data[: max(left, 0)].decode("utf-8", "ignore")
            left -= len(data)
        for key in ("data", "blob"):
            value = block.get(key) if key == "data" else (block.get("resource") or {}).get("blob")
            if isinstance(value, str) and len(value) > soft // 2:
                content[index] = {
                    "type": "text",
                    "text": f"[{block.get('type', 'binary')} content of {len(value)} bytes left out]",
                }
                break
    if cut:
        content.append({"type": "text", "text": f"\n[{cut} more bytes were cut]"})
    if len(json.dumps(result.get("structuredContent"), default=str)) > text_cap:
        result.pop("structuredContent", None)
    out = json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n"
    return out if len(out) <= soft else None


def relay(source, sink, soft: int, hard: int, text_cap: int) -> None:
    """Copy ``source``'s lines to ``sink`` with the rules of the module docstring."""
    parts = []
    size = 0
    head = b""
    tail = b""
    while True:
        chunk = os.read(source, CHUNK)
        if not chunk:
            return
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start : end + 1]
            if size <= hard:
                parts.append(piece)
            size += len(piece)
            if len(head) < 4096:
                head += piece[: 4096 - len(head)]
            tail = (tail + piece)[-4096:]
            if end < 0:
                break
            line_size = size
            if line_size <= soft:
                sink.write(b"".join(parts))
            else:
                smaller = shrink(b"".join(parts), soft, text_cap) if line_size <= hard else None
                if smaller is not None:
                    sink.write(smaller)
                else:
                    rid = request_id(head, tail.rstrip(b"\n"))
                    if rid is not None:
                        sink.write(too_large(rid, line_size))
            sink.flush()
            parts, size, head, tail = [], 0, b"", b""
            start = end + 1
            if start >= len(chunk):
                break


def main() -> int:
    """Start the server with its stdout through us; relay; exit as it did."""
    die_with_parent()
    soft, hard, text_cap = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    command = sys.argv[sys.argv.index("--") + 1 :]
    read_fd, write_fd = os.pipe()
    try:
        server = subprocess.Popen(command, stdout=write_fd, close_fds=True, preexec_fn=die_with_parent)
    except OSError as exc:
        sys.stderr.write(f"cannot start {command[0]}: {exc.strerror or exc}\n")
        return 127
    finally:
        os.close(write_fd)
    sink = os.fdopen(1, "wb")
    try:
        relay(read_fd, sink, soft, hard, text_cap)
    except (BrokenPipeError, OSError):
        server.kill()
    code = server.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
