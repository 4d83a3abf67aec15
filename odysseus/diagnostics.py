"""The streaming self-test: frames sent at known intervals, and how to tell they arrived bunched.

``GET /api/diagnostics/stream`` sends ``count`` frames ``interval`` seconds apart, each with
its number and the server's send time. A client records when each frame arrives. Behind
a proxy that buffers the response (nginx without ``proxy_buffering off``, gzip on
``text/event-stream``, a CDN), the frames arrive together at the end instead of spread
out. ``assess`` is that judgement, shared by ``odysseus doctor`` (the page has the same
rule in ``static/js/selftest.js``). No Flask here.
"""

from __future__ import annotations

import json
import time
from typing import Iterator, List, Sequence

DEFAULT_COUNT = 5
DEFAULT_INTERVAL = 0.4
#: the frames are "bunched" when they arrive over less than this share of the time they were sent over
BUNCHED_RATIO = 0.5
FIX = (
    "a proxy between you and Odysseus buffers or compresses the event stream; in nginx set "
    "`proxy_buffering off;` for Odysseus (it honours the app's `X-Accel-Buffering: no`) and do not gzip "
    '`text/event-stream` - see docs/deploy.md, "Streaming through a proxy"'
)


def frames(count: int = DEFAULT_COUNT, interval: float = DEFAULT_INTERVAL, sleep=time.sleep) -> Iterator[str]:
    """The self-test's SSE text: a comment at once, then ``count`` numbered, timestamped frames."""
    yield ": diagnostics\n\n"
    for seq in range(1, count + 1):
        if seq > 1:
            sleep(interval)
        payload = {
            "type": "diagnostic",
            "seq": seq,
            "count": count,
            "interval_ms": round(interval * 1000),
            "sent_at": time.time(),
        }
        yield f"id: {seq}\ndata: {json.dumps(payload)}\n\n"
    yield "data: [DONE]\n\n"


def assess(arrivals: Sequence[float], interval: float, count: int) -> dict:
    """Judge frame arrival times (seconds, any clock): ``ok``, ``buffered`` or ``incomplete``."""
    expected = interval * (count - 1)
    received = len(arrivals)
    if received < count:
        return {
            "verdict": "incomplete",
            "received": received,
            "expected": count,
            "message": f"only {received} of {count} frames arrived; the stream was cut or timed out",
        }
    spread = max(arrivals) - min(arrivals) if arrivals else 0.0
    gaps: List[float] = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
    result = {
        "received": received,
        "expected": count,
        "spread_s": round(spread, 3),
        "expected_spread_s": round(expected, 3),
        "largest_gap_s": round(max(gaps), 3) if gaps else 0.0,
    }
    if expected > 0 and spread < expected * BUNCHED_RATIO:
        return dict(
            result,
            verdict="buffered",
            message=f"the {count} frames, sent over {expected:.1f} s, arrived within {spread:.2f} s: "
            f"replies will appear in one burst at the end. Likely cause and fix: {FIX}",
        )
    return dict(result, verdict="ok", message=f"frames arrived as sent ({spread:.2f} s for {expected:.1f} s)")
