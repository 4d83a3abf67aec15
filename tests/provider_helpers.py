"""Helpers for driving a provider adapter directly in tests."""

from __future__ import annotations

import threading
import time
from typing import List, Optional, Tuple

from odysseus.cancel import CancelToken
from odysseus.errors import ProviderError
from odysseus.events import DELTA, TOOL_CALL, Event
from odysseus.llm.base import ChatRequest, ProviderConfig
from odysseus.llm.registry import ADAPTERS

FAST = {"CONNECT_TIMEOUT": 2.0, "FIRST_TOKEN_TIMEOUT": 1.0, "IDLE_TIMEOUT": 1.0}
HELLO = [{"role": "user", "content": "hi"}]


def make(kind: str, base_url: str, app_config: Optional[dict] = None, **fields):
    """A provider of ``kind`` at ``base_url`` with fast timeouts."""
    options = fields.pop("options", {})
    cfg = ProviderConfig(name=fields.pop("name", kind), kind=kind, base_url=base_url, options=options, **fields)
    return ADAPTERS[kind](cfg, {**FAST, **(app_config or {})})


def collect(
    provider, request: Optional[ChatRequest] = None, cancel: Optional[CancelToken] = None
) -> Tuple[List[Event], Optional[ProviderError]]:
    """Every event the provider yields, and the ProviderError it ended with (or None)."""
    events: List[Event] = []
    try:
        for event in provider.stream(request or ChatRequest("m", HELLO), cancel or CancelToken()):
            events.append(event)
    except ProviderError as exc:
        return events, exc
    return events, None


def text(events: List[Event], thinking: bool = False) -> str:
    """Joined content (or reasoning) deltas."""
    return "".join(e.data["delta"] for e in events if e.type == DELTA and bool(e.data.get("thinking")) == thinking)


def tool_calls(events: List[Event]) -> List[dict]:
    """The tool_call events' data."""
    return [e.data for e in events if e.type == TOOL_CALL]


def of_type(events: List[Event], kind: str) -> List[dict]:
    """Data of every event of one type."""
    return [e.data for e in events if e.type == kind]


def stop_while_streaming(provider, fake, request: Optional[ChatRequest] = None, after: float = 0.5) -> dict:
    """Stream in a thread, cancel after ``after`` s; report how the stream ended and when the server noticed."""
    cancel = CancelToken()
    outcome: dict = {"events": []}

    def run():
        try:
            for event in provider.stream(request or ChatRequest("m", HELLO), cancel):
                outcome["events"].append(event)
            outcome["ended"] = "returned"
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            outcome["ended"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    time.sleep(after)  # the scenario: the stream runs (or stalls) this long before the stop
    stopped_at = time.monotonic()
    cancel.cancel("stopped")
    thread.join(5)
    outcome["thread_alive"] = thread.is_alive()
    record = fake.posts[-1]
    record.finished.wait(5)
    outcome["server_saw_close_after"] = None if record.disconnected_at is None else record.disconnected_at - stopped_at
    return outcome
