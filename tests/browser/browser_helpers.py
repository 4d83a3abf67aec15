"""Helpers for the browser tests: screenshots, page loading, scripted SSE bodies."""

from __future__ import annotations

import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHOTS = os.path.join(ROOT, "test-output", "screenshots")


def shot(page, name: str) -> str:
    """Save a screenshot under test-output/screenshots/ for a reviewer."""
    os.makedirs(SHOTS, exist_ok=True)
    path = os.path.join(SHOTS, f"{name}.png")
    page.screenshot(path=path)
    return path


def open_app(page, url: str, session: str = "") -> None:
    """Load the page and wait until it has loaded sessions and models."""
    page.goto(url + (f"/?session={session}" if session else "/"))
    page.wait_for_selector("body[data-ready=true]")


def sse(*events, done: bool = True) -> str:
    """A scripted /api/chat_stream body: each event a dict (or ("error", dict)), numbered from 2."""
    out = [": connected\n\n"]
    for number, event in enumerate(events, start=2):
        if isinstance(event, tuple) and event[0] == "error":
            out.append(f"id: {number}\nevent: error\ndata: {json.dumps(event[1])}\n\n")
        else:
            out.append(f"id: {number}\ndata: {json.dumps(event)}\n\n")
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out)


def fulfil_sse(route, body: str, session_id: str, run_id: str = "run_scripted") -> None:
    """Answer an intercepted request with a scripted SSE body and the run/session headers."""
    route.fulfill(
        status=200,
        body=body,
        headers={
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-cache",
            "X-Odysseus-Run-Id": run_id,
            "X-Odysseus-Session-Id": session_id,
        },
    )
