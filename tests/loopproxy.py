"""A loopback TCP proxy that tests shape: the accept loop and the two pumps of every proxy here.

``LoopbackProxy`` forwards 127.0.0.1:<port> to 127.0.0.1:<target_port> with one thread per
direction. What happens to the bytes is a subclass's ``forwarders(client, upstream)``: two
callables ``(src, dst, data) -> bool`` (send what it wants, False to end the connection), one
for the request direction and one for the response direction, made fresh per connection so
they may keep per-connection state (``cutproxy.CutProxy``'s byte budget).
"""

from __future__ import annotations

import socket
import threading
from typing import Callable, List, Tuple

Forward = Callable[[socket.socket, socket.socket, bytes], bool]


def forward_all(src: socket.socket, dst: socket.socket, data: bytes) -> bool:
    """Send everything on."""
    dst.sendall(data)
    return True


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class LoopbackProxy:
    """The listener, the accept loop and the pumps; subclasses set their state, then call this ``__init__``."""

    connect_timeout = 5.0

    def __init__(self, target_port: int):
        self.target = ("127.0.0.1", target_port)
        self.lock = threading.Lock()
        self.pairs: List[Tuple[socket.socket, socket.socket]] = []  # (client, upstream) of open connections
        self.closed = False
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._accept, daemon=True).start()

    def forwarders(self, client: socket.socket, upstream: socket.socket) -> Tuple[Forward, Forward]:
        """(request direction, response direction) for one new connection: both forward everything."""
        return forward_all, forward_all

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=self.connect_timeout)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.pairs.append((client, upstream))
            request, response = self.forwarders(client, upstream)
            threading.Thread(target=self._pump, args=(client, upstream, request), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, response), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, forward: Forward) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data or not forward(src, dst, data):
                    break
        except OSError:
            pass
        finally:
            _shutdown(src)
            _shutdown(dst)

    def cut_all(self) -> int:
        """Shut down and close every open connection (the listener stays); how many there were."""
        with self.lock:
            pairs, self.pairs = self.pairs, []
        for client, upstream in pairs:
            for sock in (client, upstream):
                _shutdown(sock)
                sock.close()
        return len(pairs)

    def close(self) -> None:
        """Stop accepting and cut everything."""
        self.closed = True
        _shutdown(self.listener)  # wakes the accept thread (a plain close leaves it blocked: see test_stream_reader)
        self.listener.close()
        self.cut_all()
