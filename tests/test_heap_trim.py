"""HeapTrimmer: trims after enough evicted bytes and time (sooner once the engine holds nothing), never
more often, survives a failing trim, and does nothing where the C library has no malloc_trim; the engine's
janitor feeds it from evictions. freeze_startup_heap: a built app's objects leave the full collections,
what is made afterwards is still collected, and the young generation is collected less often. The entry
point (wsgi.py) spawns greenlets that do not keep their spawner's stack."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

from odysseus.config import DEFAULTS
from odysseus.events import DELTA, Event
from odysseus.runs.engine import RunEngine
from odysseus.runs.heap_trim import HeapTrimmer, _libc_trim
from odysseus.store import Store


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_trims_only_after_enough_bytes_and_time():
    calls, clock = [], Clock()
    trimmer = HeapTrimmer(min_bytes=1000, min_interval=30, trim=lambda pad: calls.append(pad) or 1, clock=clock)
    trimmer.released(999)
    clock.now += 60
    assert not trimmer.maybe_trim() and calls == []  # not enough freed
    trimmer.released(1)
    assert trimmer.maybe_trim() and calls == [0]
    trimmer.released(10_000)
    clock.now += 29
    assert not trimmer.maybe_trim()  # too soon while runs are held
    assert trimmer.maybe_trim(idle=True) and calls == [0, 0]  # the busy period is over: at once
    trimmer.released(10_000)
    clock.now += 0.5
    assert not trimmer.maybe_trim(idle=True)  # even idle, not twice within a second
    assert trimmer.trims == 2


def test_a_failing_trim_or_no_malloc_trim_is_harmless():
    def broken(pad):
        raise OSError("no")

    trimmer = HeapTrimmer(min_bytes=1, min_interval=0, trim=broken)
    trimmer.released(5)
    assert trimmer.maybe_trim() is False and trimmer.trims == 0
    absent = HeapTrimmer(min_bytes=1, min_interval=0)
    absent.trim = None  # as on a C library without malloc_trim
    absent.released(5)
    assert absent.maybe_trim() is False


def test_the_real_malloc_trim_is_found_on_glibc_and_runs():
    trim = _libc_trim()
    if trim is not None:  # glibc (this project's Debian images); musl and macOS have none
        assert trim(0) in (0, 1)


def test_the_janitor_trims_after_evicting_many_finished_runs(tmp_path):
    store = Store(str(tmp_path / "o.db"))
    engine = RunEngine(store, dict(DEFAULTS, DATA_DIR=str(tmp_path), EVICT_GRACE=0.01))
    calls, clock = [], Clock()
    engine._heap = HeapTrimmer(
        min_bytes=10_000, min_interval=3600, trim=lambda pad: calls.append(pad) or 1, clock=clock
    )
    try:
        from bench.turn_start import hold_finished_runs

        hold_finished_runs(engine, 200)
        for run in list(engine._finished.values()):  # each held log gets some payload to free
            for _ in range(5):
                run.log.append_entry(
                    (Event(DELTA, {"delta": "x" * 20}, run.log.last_seq + 1), '{"delta":"' + "x" * 20 + '"}')
                )
            engine._schedule_evict(run, grace=0)
        time.sleep(0.02)
        clock.now += 2  # past the idle interval, far from min_interval
        engine.sweep()
        assert not engine._finished and calls == [0]  # everything evicted, nothing held: trimmed at once
    finally:
        engine.close()
        store.close()


def test_a_frozen_startup_heap_is_skipped_and_later_garbage_still_collected(tmp_path):
    """In a child process: gc.freeze is process-wide, and this suite's own heap must stay as it is."""
    script = textwrap.dedent(
        f"""
        import gc, os
        os.environ.update(ODYSSEUS_DATA_DIR={str(tmp_path)!r}, ODYSSEUS_AUTH="none")
        from odysseus import create_app
        from odysseus.runs.heap_trim import OLD_THRESHOLD, YOUNG_THRESHOLD, freeze_startup_heap
        app = create_app()
        assert gc.get_threshold() == (700, 10, 10)  # CPython's defaults until the worker is built
        tracked = len(gc.get_objects())
        frozen = freeze_startup_heap()
        assert frozen > 10_000 and frozen >= tracked * 0.9, (frozen, tracked)
        assert len(gc.get_objects()) < tracked * 0.1  # a full collection walks only what is left

        class Node:
            pass

        import weakref
        gc.disable()  # only the explicit collection below may find them
        watched = []
        for _ in range(1000):  # cycles made after the freeze are garbage as before
            a, b = Node(), Node()
            a.other, b.other = b, a
            watched.append(weakref.ref(a))
        del a, b
        assert all(ref() is not None for ref in watched)
        assert gc.collect() >= 2000 and all(ref() is None for ref in watched)
        gc.enable()
        # still frozen after the collection (a frozen object the app's threads free leaves the count)
        assert frozen * 0.9 < gc.get_freeze_count() <= frozen, (gc.get_freeze_count(), frozen)
        assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, OLD_THRESHOLD), gc.get_threshold()
        assert YOUNG_THRESHOLD > 700 and OLD_THRESHOLD > 10
        app.extensions["odysseus.runs"].close()
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_the_entry_point_spawns_greenlets_that_do_not_keep_their_spawners_stack(tmp_path):
    """In a child process (wsgi.py patches the process): what gunicorn loads turns gevent's tree tracking off."""
    script = textwrap.dedent(
        f"""
        import os
        os.environ.update(ODYSSEUS_DATA_DIR={str(tmp_path)!r}, ODYSSEUS_AUTH="none")
        import wsgi
        import gevent
        greenlet = gevent.spawn(lambda: 41 + 1)
        assert greenlet.get() == 42
        assert not gevent.config.track_greenlet_tree
        assert greenlet.spawning_stack is None and greenlet.spawn_tree_locals is None
        wsgi.app.extensions["odysseus.runs"].close()
        print("ok")
        """
    )
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=root)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
