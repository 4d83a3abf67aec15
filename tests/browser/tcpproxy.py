"""A loopback TCP proxy whose connections a test can cut, to simulate a network drop mid-stream."""

from __future__ import annotations

import socket
import time
from typing import Dict, Tuple

from loopproxy import Forward, LoopbackProxy


class TcpProxy(LoopbackProxy):
    """Forward 127.0.0.1:<port> to a target; ``drop_all()`` closes every open connection."""

    def __init__(self, target_port: int):
        self.frozen: set = set()  # sockets whose data is swallowed: a connection gone silent
        self.last_data: Dict[socket.socket, float] = {}
        super().__init__(target_port)

    def _forward(self, src: socket.socket, dst: socket.socket, data: bytes) -> bool:
        self.last_data[src] = time.monotonic()
        if src not in self.frozen and dst not in self.frozen:
            dst.sendall(data)
        return True

    def forwarders(self, client: socket.socket, upstream: socket.socket) -> Tuple[Forward, Forward]:
        """Both directions note when data last passed and swallow it on frozen connections."""
        return self._forward, self._forward

    def drop_all(self) -> int:
        """Cut every open connection at once (as a proxy timeout or a network drop would)."""
        return self.cut_all()

    def freeze_streaming(self, within: float = 0.3) -> int:
        """Make the connections that carried data in the last ``within`` seconds go silent
        without closing them (a dead NAT entry, a hung proxy); idle pooled ones stay usable."""
        now = time.monotonic()
        with self.lock:
            busy = [pair for pair in self.pairs if now - self.last_data.get(pair[1], 0) < within]
            for client, upstream in busy:
                self.frozen.update((client, upstream))
            return len(busy)
