"""A loopback HTTP proxy that opens CONNECT tunnels, as corporate proxies do for https.

Each ``CONNECT host:port`` is recorded (its target and header lines) and, unless the proxy wants
credentials it was not given (407) or ``refuse`` is set (403), answered ``200`` and relayed byte for
byte in both directions until either side closes. ``tunnels`` counts the tunnels opened and
``open_tunnels`` those still relaying. With ``silent`` set it answers no CONNECT and notes in
``hung_up`` when each such client closed its connection.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import List, Optional, Tuple


class TunnelProxy:
    """A CONNECT-only forward proxy on a free loopback port (see the module)."""

    def __init__(self, authorization: Optional[str] = None):
        self.authorization = authorization  # the Proxy-Authorization value it demands, if any
        self.refuse = False
        self.silent = False
        self.hung_up: List[float] = []  # time.monotonic() of each silent CONNECT's client closing
        self.requests: List[Tuple[str, List[str]]] = []
        self.tunnels = 0
        self.open_tunnels = 0
        self._lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        buffer = b""
        while b"\r\n\r\n" not in buffer:
            data = conn.recv(65536)
            if not data:
                conn.close()
                return
            buffer += data
        head, _, rest = buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target = lines[0].split(" ")[:2]
        headers = lines[1:]
        self.requests.append((lines[0], headers))
        given = next(
            (h.split(":", 1)[1].strip() for h in headers if h.lower().startswith("proxy-authorization:")), None
        )
        if method != "CONNECT":
            conn.sendall(b"HTTP/1.1 405 Only CONNECT\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            conn.close()
            return
        if self.authorization is not None and given != self.authorization:
            conn.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
            conn.close()
            return
        if self.silent:
            try:
                while conn.recv(65536):
                    pass
            except OSError:
                pass
            self.hung_up.append(time.monotonic())
            conn.close()
            return
        if self.refuse:
            conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            conn.close()
            return
        host, _, port = target.rpartition(":")
        try:
            upstream = socket.create_connection((host.strip("[]"), int(port)), timeout=5)
        except OSError:
            conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            conn.close()
            return
        upstream.settimeout(None)
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        if rest:
            upstream.sendall(rest)
        with self._lock:
            self.tunnels += 1
            self.open_tunnels += 1
        pipes = [
            threading.Thread(target=self._pipe, args=pair, daemon=True) for pair in ((conn, upstream), (upstream, conn))
        ]
        for pipe in pipes:
            pipe.start()
        for pipe in pipes:
            pipe.join()
        conn.close()
        upstream.close()
        with self._lock:
            self.open_tunnels -= 1

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):  # one side ended: end the tunnel both ways
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        """Stop accepting (the blocked accept() is woken by the shutdown)."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
