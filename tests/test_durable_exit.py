"""A process that ends without closing its app exits quietly: the durable flusher stops, it does not log."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAM = textwrap.dedent(
    """
    import logging, sys, tempfile, time
    logging.basicConfig(level=logging.WARNING)
    from odysseus import create_app
    create_app({"DATA_DIR": tempfile.mkdtemp(), "PROVIDERS": [], "EVENT_FLUSH_INTERVAL": 0.00001})
    time.sleep(0.05)  # the flusher submits thousands of flushes; one of them meets the exit
    """
)


@pytest.mark.slow  # four interpreter starts: several seconds
def test_an_unclosed_app_exits_without_a_durable_flush_error(tmp_path):
    """Before the fix, 2 to 6 runs in 10 printed "durable flush failed" and a traceback at exit."""
    for _ in range(4):
        done = subprocess.run(
            [sys.executable, "-c", PROGRAM],
            cwd=ROOT,
            env=dict(os.environ, TMPDIR=str(tmp_path)),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert "flush failed" not in done.stderr and "Traceback" not in done.stderr, done.stderr
