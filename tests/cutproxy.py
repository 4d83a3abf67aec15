"""A loopback TCP proxy that cuts connections at random points of the server's byte stream.

Each new connection gets a random budget of response bytes (``low``..``high``); once it has
forwarded that many bytes (the cut can fall inside a frame, a line or a UTF-8 sequence) it
closes both sides. After ``max_cuts`` cuts it forwards everything, so a client that keeps
reconnecting always gets to the end (a bounded test). Seeded: a failure is reproducible.
"""

from __future__ import annotations

import random
import socket
import threading
from typing import List


class CutProxy:
    """Forward 127.0.0.1:<port> to 127.0.0.1:<target_port>, cutting each connection after a random byte count."""

    def __init__(self, target_port: int, low: int = 150, high: int = 2500, max_cuts: int = 40, seed: int = 12):
        self.target = ("127.0.0.1", target_port)
        self.low, self.high = low, high
        self.max_cuts = max_cuts
        self.random = random.Random(seed)
        self.cuts = 0
        self.connections = 0
        self._lock = threading.Lock()
        self._socks: List[socket.socket] = []
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _budget(self) -> int:
        with self._lock:
            self.connections += 1
            if self.cuts >= self.max_cuts:
                return -1  # unlimited
            return self.random.randint(self.low, self.high)

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._socks += [client, upstream]
            budget = self._budget()
            threading.Thread(target=self._pump, args=(client, upstream, -1), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, budget), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, budget: int) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if budget >= 0 and len(data) >= budget:
                    dst.sendall(data[:budget])
                    with self._lock:
                        self.cuts += 1
                    break
                if budget >= 0:
                    budget -= len(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        """Stop accepting and close every socket."""
        self.closed = True
        self.listener.close()
        with self._lock:
            socks, self._socks = self._socks, []
        for sock in socks:
            try:
                sock.close()
            except OSError:
                pass
