"""A hostile MCP server for the tests (issue 34), hand-written JSON-RPC over stdio so it can misbehave.

``python hostile.py MODE [LOG]``; every message it receives is appended to LOG (one JSON per line)
when given, so a test can see e.g. the ``notifications/cancelled`` the client sent. Modes:

- ``noinit``: never answers ``initialize`` (reads and ignores everything);
- ``normal``: tools ``echo`` (answers at once) and ``sleep`` (answers after ``seconds``, with a
  progress notification every 0.1 s); plus the hostile ones: ``malformed`` (writes lines that are
  not JSON-RPC, then never answers), ``huge`` (a 50 MB text result), ``crash`` (exits mid-call),
  ``flood`` (2000 progress notifications, then the answer), ``change`` (answers, then sends
  ``notifications/tools/list_changed`` and lists one more tool from then on); and tools with odd
  names (spaces, dots, unicode, 80 characters) and a schema whose ``$ref`` points at itself; and, for the
  sandbox, ``read`` (a file's first bytes) and ``connect`` (a TCP connection to ``host``/``port``);
- ``dies``: exits at once, saying why on stderr.
"""

import json
import sys
import threading
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "normal"
LOG = sys.argv[2] if len(sys.argv) > 2 else None
lock = threading.Lock()
changed = False

LOOP_SCHEMA = {
    "type": "object",
    "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}, "v": {"type": "string"}}}},
    "properties": {"tree": {"$ref": "#/$defs/node"}, "self": {"$ref": "#"}},
    "additionalProperties": False,
}


def tools():
    found = [
        {
            "name": "echo",
            "description": "echo text",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        },
        {
            "name": "sleep",
            "description": "sleeps",
            "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}},
        },
        {"name": "malformed", "description": "answers garbage", "inputSchema": {"type": "object"}},
        {"name": "huge", "description": "50 MB of text", "inputSchema": {"type": "object"}},
        {"name": "crash", "description": "exits mid-call", "inputSchema": {"type": "object"}},
        {"name": "flood", "description": "floods progress", "inputSchema": {"type": "object"}},
        {"name": "change", "description": "changes the tool list", "inputSchema": {"type": "object"}},
        {"name": "odd name/with.dots ünïcode", "description": "odd", "inputSchema": {"type": "object"}},
        {"name": "odd name/with.dots ünïcode!", "description": "odd twin", "inputSchema": {"type": "object"}},
        {"name": "x" * 80, "description": "long", "inputSchema": {"type": "object"}},
        {"name": "loop", "description": "a $ref loop", "inputSchema": LOOP_SCHEMA},
        {"name": "read", "description": "reads a file", "inputSchema": {"type": "object"}},
        {"name": "connect", "description": "opens a TCP connection", "inputSchema": {"type": "object"}},
    ]
    if changed:
        found.append({"name": "added_later", "description": "listed after a change", "inputSchema": {"type": "object"}})
    return found


def send(message):
    with lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def result(rid, text, is_error=False):
    send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}], "isError": is_error}})


def call(rid, params):
    global changed
    name = params.get("name")
    args = params.get("arguments") or {}
    token = (params.get("_meta") or {}).get("progressToken")
    if name == "echo":
        result(rid, f"echo: {args.get('text')}")
    elif name == "sleep":
        end = time.monotonic() + float(args.get("seconds", 5))
        n = 0
        while time.monotonic() < end:
            time.sleep(0.1)
            n += 1
            if token is not None:
                send(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": n, "message": f"step {n}"},
                    }
                )
        result(rid, f"slept {n}")
    elif name == "malformed":
        with lock:
            sys.stdout.write(
                'this is not json\n{"jsonrpc": "2.0", "id": \n[1, 2, 3]\n{"jsonrpc": "1.0", "weird": true}\n'
            )
            sys.stdout.flush()
    elif name == "huge":
        result(rid, "A" * (50 * 1024 * 1024))
    elif name == "crash":
        sys.stdout.flush()
        import os

        os._exit(3)
    elif name == "flood":
        for n in range(2000):
            send(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": n, "total": 2000},
                }
            )
        result(rid, "flooded")
    elif name == "read":
        try:
            with open(args.get("path", ""), "rb") as fh:
                result(rid, "read: " + fh.read(200).decode("utf-8", "replace"))
        except OSError as exc:
            result(rid, f"cannot read: {exc.strerror}", is_error=True)
    elif name == "connect":
        import socket

        try:
            socket.create_connection((args.get("host"), int(args.get("port"))), timeout=3).close()
            result(rid, "connected")
        except OSError as exc:
            result(rid, f"cannot connect: {exc.strerror or exc}", is_error=True)
    elif name == "change":
        changed = True
        result(rid, "changed")
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    else:
        result(rid, f"tool {name!r} ran", is_error=name not in [t["name"] for t in tools()])


def main():
    if MODE == "dies":
        sys.stderr.write("hostile: cannot open the database /nowhere\n")
        sys.exit(2)
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if LOG:
            with open(LOG, "a") as fh:
                fh.write(json.dumps(message) + "\n")
        method, rid = message.get("method"), message.get("id")
        if MODE == "noinit":
            continue
        if method == "initialize":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "result": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {"tools": {"listChanged": True}},
                        "serverInfo": {"name": "hostile", "version": "1"},
                    },
                }
            )
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools()}})
        elif method == "tools/call":
            threading.Thread(target=call, args=(rid, message.get("params") or {}), daemon=True).start()
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": rid, "result": {}})
        elif rid is not None and method:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no such method"}})


if __name__ == "__main__":
    main()
