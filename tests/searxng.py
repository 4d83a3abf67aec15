"""A SearXNG stand-in: ``GET /search?format=json`` answers fixed result rows (loopback only)."""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterator, List, Optional, Union
from urllib.parse import parse_qs, urlparse


@contextmanager
def searxng(
    results: Union[List[dict], Callable[[str], Optional[List[dict]]]], control: Optional[dict] = None
) -> Iterator[str]:
    """Serve ``results`` as SearXNG's JSON answer; yields the base URL.

    ``results`` is read on every request (a test may change the list), or called with the query
    (returning None answers HTTP 500). ``control``, when given, is a mutable dict:
    ``control["status"]`` (e.g. 503) makes the next answers fail with that status, and
    ``control["queries"]`` collects every ``q`` asked.
    """
    control = control if control is not None else {}
    control.setdefault("queries", [])

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802 - http.server naming
            query = parse_qs(urlparse(self.path).query).get("q", [""])[0]
            control["queries"].append(query)
            rows = results(query) if callable(results) else results
            status = int(control.get("status") or (200 if rows is not None else 500))
            body = json.dumps({"results": rows} if status == 200 else {"error": "unavailable"}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
