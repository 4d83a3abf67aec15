"""Run a test script in a child Python: gevent's monkey patch and the collector's settings are process-wide."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_json(script: str, *args: object, timeout: float = 120) -> Any:
    """Run ``script`` with ``args`` from the project root; the JSON its last stdout line holds (it must exit 0)."""
    proc = subprocess.run(
        [sys.executable, "-c", script, *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
