"""A loopback TCP proxy whose connections a test can cut, to simulate a network drop mid-stream."""

from __future__ import annotations

import socket
import threading
import time
from typing import Dict, List, Tuple


class TcpProxy:
    """Forward 127.0.0.1:<port> to a target; ``drop_all()`` closes every open connection."""

    def __init__(self, target_port: int):
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.pairs: List[Tuple[socket.socket, socket.socket]] = []
        self.lock = threading.Lock()
        self.closed = False
        self.drops = 0
        self.frozen: set = set()  # sockets whose data is swallowed: a connection gone silent
        self.last_data: Dict[socket.socket, float] = {}
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.pairs.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                self.last_data[src] = time.monotonic()
                if src not in self.frozen and dst not in self.frozen:
                    dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def drop_all(self) -> int:
        """Cut every open connection at once (as a proxy timeout or a network drop would)."""
        with self.lock:
            pairs, self.pairs = self.pairs, []
        for client, upstream in pairs:
            for sock in (client, upstream):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
        self.drops += 1
        return len(pairs)

    def freeze_streaming(self, within: float = 0.3) -> int:
        """Make the connections that carried data in the last ``within`` seconds go silent
        without closing them (a dead NAT entry, a hung proxy); idle pooled ones stay usable."""
        now = time.monotonic()
        with self.lock:
            busy = [pair for pair in self.pairs if now - self.last_data.get(pair[1], 0) < within]
            for client, upstream in busy:
                self.frozen.update((client, upstream))
            return len(busy)

    def close(self) -> None:
        """Stop accepting and cut everything."""
        self.closed = True
        self.listener.close()
        self.drop_all()
