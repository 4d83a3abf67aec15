"""A loopback HTTP/1.1 server that answers with scripted raw bytes: for what a library server will not send."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from typing import List, Optional, Tuple, Union

from odysseus.llm.http import shutdown_socket


class RawServer:
    """Answers each request on a connection with the next scripted raw response, in scripted pieces.

    A response is a list of byte strings sent one ``sendall`` each (a number instead is a pause of that
    many seconds); a last piece ``b""`` closes the connection. ``requests`` records each request as
    (head, body, the bytes of its first ``recv``); ``connections`` counts the connections accepted.
    With ``tls`` (a server context) it speaks HTTPS.
    """

    def __init__(self, responses: List[List[Union[bytes, float]]], tls: Optional[ssl.SSLContext] = None):
        self.responses = list(responses)
        self.tls = tls
        self.connections = 0
        self.requests: List[Tuple[bytes, bytes, bytes]] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while self.responses:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        if self.tls is not None:
            try:
                conn = self.tls.wrap_socket(conn, server_side=True)
            except (OSError, ssl.SSLError):
                conn.close()  # a client that does not trust us ends the handshake
                return
        with conn:
            buffer = b""
            while self.responses:
                first = b""
                while b"\r\n\r\n" not in buffer:
                    data = conn.recv(65536)
                    if not data:
                        return
                    first = first or data
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = int(
                    next(
                        (
                            line.split(b":")[1]
                            for line in head.split(b"\r\n")
                            if line.lower().startswith(b"content-length:")
                        ),
                        b"0",
                    )
                )
                while len(buffer) < length:
                    buffer += conn.recv(65536)
                self.requests.append((head, buffer[:length], first))
                buffer = buffer[length:]
                pieces = self.responses.pop(0)
                for piece in pieces:
                    if isinstance(piece, bytes):
                        conn.sendall(piece)
                    else:
                        time.sleep(piece)
                if pieces and pieces[-1] == b"":  # scripted close
                    return

    def close(self) -> None:
        """Stop listening and end the accept thread.

        A plain ``close()`` leaves the thread blocked in ``accept()`` (Linux does not wake it) while the
        descriptor number goes to the next socket the process opens. With such threads left behind,
        test_bad_text's fake providers (opened later in the same process) lost connections: poll said
        ready and their own accept() then blocked, the model's connection was reset and the fake's
        shutdown hung (in about one run in two after this module; in none since the thread is woken).
        """
        shutdown_socket(self.sock)  # wakes the blocked accept() with an error
        self.sock.close()
