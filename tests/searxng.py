"""A SearXNG stand-in: ``GET /search?format=json`` answers fixed result rows (loopback only)."""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterator, List, Union
from urllib.parse import parse_qs, urlparse


@contextmanager
def searxng(results: Union[List[dict], Callable[[str], List[dict]]]) -> Iterator[str]:
    """Serve ``results`` (or ``results(query)``; None answers HTTP 500) as SearXNG's JSON; yields the base URL."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802 - http.server naming
            query = parse_qs(urlparse(self.path).query).get("q", [""])[0]
            rows = results(query) if callable(results) else results
            body = json.dumps({"results": rows}).encode()
            self.send_response(200 if rows is not None else 500)  # None: the backend fails
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
