"""gunicorn's gevent worker, with keep-alive connections that close once the worker stops.

After a response, gunicorn keeps an HTTP/1.1 connection open for the client's next request (up to
``keepalive`` seconds), and its graceful shutdown waits for every open connection. So on SIGTERM or a
reload, a stream whose run had already ended stayed open (its client, reading to EOF, hung) and the
worker lived on until the graceful timeout (``SHUTDOWN_GRACE`` + margin). This worker, once stopping:

- closes a connection as soon as its current response is complete (no next request on it);
- closes connections that sit idle waiting for a next request, at once;

so the worker exits as soon as its runs are done and their responses sent. Runs without a connection
are still drained by ``worker_exit`` (gunicorn.conf.py). Configured in gunicorn.conf.py as
``worker_class``. ``quiet_interpreter_exit`` keeps the worker's last moments free of gevent's
teardown noise.
"""

from __future__ import annotations

import logging
from typing import Any, Set

import gevent
from gevent import monkey
from gunicorn.http.errors import NoMoreData
from gunicorn.workers.ggevent import GeventWorker


class _IdleWait:
    """gunicorn's keep-alive timeout around waiting for a connection's next request, with the waiting
    greenlet registered as idle so a stopping worker can close its connection."""

    def __init__(self, worker: "DrainingGeventWorker", timeout: Any) -> None:
        self.worker = worker
        self.timeout = timeout

    def __enter__(self) -> Any:
        if not self.worker.alive:
            raise NoMoreData(b"")  # stopping: no next request on this connection
        self.worker.idle.add(gevent.getcurrent())
        return self.timeout.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        self.worker.idle.discard(gevent.getcurrent())
        return self.timeout.__exit__(*exc)


class DrainingGeventWorker(GeventWorker):
    """The gevent worker whose keep-alive connections end with the worker (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: handler greenlets waiting for their connection's next request
        self.idle: Set[Any] = set()

    def timeout_ctx(self) -> _IdleWait:
        """The wait for a connection's next request (gunicorn calls it only there)."""
        return _IdleWait(self, super().timeout_ctx())

    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> bool:
        """Serve one request; once the worker is stopping, close the connection after the response."""
        keep_open: bool = super().handle_request(listener_name, req, sock, addr)
        if keep_open and not self.alive:
            raise StopIteration()  # gunicorn's own "close this connection" signal in its keep-alive loop
        return keep_open

    def handle_exit(self, sig: Any, frame: Any) -> None:
        """SIGTERM (shutdown, or the old worker of a reload): stop, and close the idle connections."""
        super().handle_exit(sig, frame)
        gevent.spawn(self.close_idle)  # a signal handler must not switch greenlets itself

    def close_idle(self) -> None:
        """End every connection waiting for a next request (its handler closes the socket)."""
        for waiting in list(self.idle):
            waiting.kill(NoMoreData(b""), block=False)


def quiet_interpreter_exit() -> None:
    """Called last in ``worker_exit``: logging's module lock becomes a plain, unpatched lock.

    Why: while the interpreter tears its modules down it collects the log handlers, and each
    collection takes logging's module lock (``logging._removeHandlerRef``). That lock is gevent's,
    whose ``get_ident`` has lost its module globals by then, so every clean SIGTERM printed
    "Exception ignored ... TypeError: 'NoneType' object is not callable". No greenlet runs any more
    at this point (the runs are drained), so a lock of the real thread is all logging needs.
    """
    plain_rlock = monkey.get_original("_thread", "RLock")
    logging._lock = plain_rlock()  # type: ignore[attr-defined]
