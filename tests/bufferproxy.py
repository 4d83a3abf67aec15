"""A loopback HTTP proxy that buffers every response whole, like nginx with ``proxy_buffering on``
and no respect for ``X-Accel-Buffering``: a stream reaches the client in one burst when it ends."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests

HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "content-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-authorization",
    "proxy-authenticate",
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP and k.lower() != "host"}
        headers["Host"] = self.headers.get("Host", "")
        upstream = requests.request(
            self.command, self.server.target + self.path, headers=headers, data=data, allow_redirects=False, timeout=60
        )
        body = upstream.content  # the whole body, however long the upstream takes: this is the buffering
        self.send_response(upstream.status_code)
        for key, value in upstream.headers.items():
            if key.lower() not in HOP:
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PATCH = do_DELETE = _forward


class BufferingProxy:
    """Listen on 127.0.0.1 (port 0) and forward to ``target`` (``http://127.0.0.1:PORT``)."""

    def __init__(self, target: str):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.server.target = target.rstrip("/")
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()
