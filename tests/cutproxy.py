"""A loopback TCP proxy that cuts connections at random points of the server's byte stream.

Each new connection gets a random budget of response bytes (``low``..``high``); once it has
forwarded that many bytes (the cut can fall inside a frame, a line or a UTF-8 sequence) it
closes both sides. After ``max_cuts`` cuts it forwards everything, so a client that keeps
reconnecting always gets to the end (a bounded test). Seeded: a failure is reproducible.
"""

from __future__ import annotations

import random
import socket
from typing import Tuple

from loopproxy import Forward, LoopbackProxy, forward_all


class CutProxy(LoopbackProxy):
    """Forward 127.0.0.1:<port> to 127.0.0.1:<target_port>, cutting each connection after a random byte count."""

    connect_timeout = 10.0

    def __init__(self, target_port: int, low: int = 150, high: int = 2500, max_cuts: int = 40, seed: int = 12):
        self.low, self.high = low, high
        self.max_cuts = max_cuts
        self.random = random.Random(seed)
        self.cuts = 0
        self.connections = 0
        super().__init__(target_port)

    def _budget(self) -> int:
        with self.lock:
            self.connections += 1
            if self.cuts >= self.max_cuts:
                return -1  # unlimited
            return self.random.randint(self.low, self.high)

    def forwarders(self, client: socket.socket, upstream: socket.socket) -> Tuple[Forward, Forward]:
        """Requests pass whole; the response stops after this connection's budget of bytes."""
        budget = self._budget()

        def cutting(src: socket.socket, dst: socket.socket, data: bytes) -> bool:
            nonlocal budget
            if budget >= 0 and len(data) >= budget:
                dst.sendall(data[:budget])
                with self.lock:
                    self.cuts += 1
                return False
            if budget >= 0:
                budget -= len(data)
            dst.sendall(data)
            return True

        return forward_all, cutting
