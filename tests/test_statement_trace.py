"""``Locked.trace`` may be swapped while other threads run statements on the request-path connection.

``sqlite3.Connection.set_trace_callback`` takes the connection's SQLite mutex while holding the GIL; a
thread inside a statement holds that mutex and needs the GIL to call the current callback. Swapping
without the repositories' lock deadlocked both threads (the start-budget test's teardown hung a CI run
for over an hour). The scenario runs in a child process so a regression fails here instead of hanging.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCENARIO = textwrap.dedent(
    """
    import sys, threading, time
    from odysseus.store import Store

    store = Store(sys.argv[1])
    seen = []
    store.locked.trace(seen.append)
    stop = threading.Event()

    def reads():
        while not stop.is_set():
            with store.locked.read() as db:
                db.execute("select count(*) from sessions").fetchone()

    worker = threading.Thread(target=reads)
    worker.start()
    swaps, until = 0, time.monotonic() + 2.0
    while time.monotonic() < until:
        store.locked.trace(None)
        store.locked.trace(seen.append)
        swaps += 1
    stop.set()
    worker.join()
    store.close()
    print(swaps, len(seen) > 0)
    """
)


def test_swapping_the_trace_while_another_thread_reads_does_not_deadlock(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", SCENARIO, str(tmp_path / "odysseus.db")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    swaps, traced = done.stdout.split()
    assert int(swaps) > 100 and traced == "True"
