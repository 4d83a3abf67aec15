"""Work that must not run on the gevent hub: a native thread the caller can wait on cooperatively.

Under gevent's monkey patch, ``threading.Thread`` is a greenlet; SQLite bulk writes, busy
waits and CPU-heavy work (password hashing, file parsing) would stall every stream. A
``NativeWorker`` is one real OS thread: callers submit a function and wait for its result
without blocking the hub (gevent's ``ThreadPool`` does the cross-thread wake-up). Without
the monkey patch (in-process tests) it is a plain one-thread executor.
"""

from __future__ import annotations

import concurrent.futures
import threading
from typing import Any, Callable, Generic, Optional, TypeVar, cast

T = TypeVar("T")


def gevent_active() -> bool:
    """True when gevent has patched ``threading`` (the real server)."""
    try:
        from gevent import monkey
    except ImportError:  # pragma: no cover - gevent is a dependency
        return False
    return bool(monkey.is_module_patched("threading"))


def hub_loop() -> Optional[Any]:
    """The gevent hub's event loop under the monkey patch, else None.

    Its ``iteration`` counts the loop's turns: a greenlet that sees it advance has been switched
    out (it blocked, or yielded) since it last looked.
    """
    if not gevent_active():
        return None
    from gevent import get_hub

    return get_hub().loop


def native_lock() -> Any:
    """A real OS lock (``threading.Lock`` before gevent's patch): a native thread blocks on it, the hub only
    ever tries it without waiting."""
    if gevent_active():
        from gevent.monkey import get_original

        return get_original("threading", "Lock")()
    return threading.Lock()


class WorkerClosed(RuntimeError):
    """The native worker takes no new work: it was closed, or the interpreter is exiting.

    A process that ends without closing its app meets the second (a test run's last in-process
    apps); a served worker closes the engine in ``worker_exit`` before that point.
    """


class NativeWorker:
    """Native threads of one's own (one by default: submitted functions run in order)."""

    def __init__(self, name: str, threads: int = 1):
        self.name = name
        self._gevent = gevent_active()
        if self._gevent:
            from gevent.threadpool import ThreadPool

            self._pool: Any = ThreadPool(threads)
        else:
            self._pool = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix=name)

    def submit(self, fn: Callable[..., T], *args: Any) -> "Pending[T]":
        """Run ``fn(*args)`` on the native thread; returns a handle to wait on."""
        if self._gevent:
            return Pending(self._pool.spawn(fn, *args), True)
        try:
            return Pending(self._pool.submit(fn, *args), False)
        except RuntimeError as exc:  # concurrent.futures says so in words only
            if "cannot schedule new futures" in str(exc):
                raise WorkerClosed(str(exc)) from None
            raise

    def call(self, fn: Callable[..., T], *args: Any, timeout: Optional[float] = None) -> T:
        """Run ``fn(*args)`` there and return its result (raising what it raised)."""
        return self.submit(fn, *args).result(timeout)

    def close(self) -> None:
        """Stop accepting work (pending work still runs)."""
        if self._gevent:
            self._pool.kill()
        else:
            self._pool.shutdown(wait=False)


class Pending(Generic[T]):
    """A submitted function's eventual result."""

    def __init__(self, inner: Any, is_gevent: bool):
        self._inner = inner
        self._gevent = is_gevent

    def result(self, timeout: Optional[float] = None) -> T:
        """Wait (cooperatively under gevent) for the result; TimeoutError when it is not there in time."""
        if self._gevent:
            import gevent

            try:
                return cast(T, self._inner.get(timeout=timeout))
            except gevent.Timeout as exc:
                raise TimeoutError(str(exc)) from None
        try:
            return cast(T, self._inner.result(timeout))
        except concurrent.futures.TimeoutError:
            raise TimeoutError("native work did not finish in time") from None

    def done(self) -> bool:
        """True once the function has returned or raised."""
        return bool(self._inner.ready() if self._gevent else self._inner.done())


def offload(fn: Callable[..., T], *args: Any) -> T:
    """Run CPU-heavy ``fn(*args)`` off the hub (gevent's shared threadpool); inline without gevent."""
    if gevent_active():
        import gevent

        return cast(T, gevent.get_hub().threadpool.apply(fn, args))
    return fn(*args)
