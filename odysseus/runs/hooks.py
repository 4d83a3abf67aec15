"""The run engine's lifecycle hooks: other parts subscribe without the engine knowing them.

Each ``RunEngine`` owns one ``EngineHooks``, so a receiver belongs to one app and goes away
with it: a run only ever reaches the receivers of the engine that drives it (several apps in
one process, as in the tests, never see each other's runs). Receivers are called in the order
they connected, in the thread or greenlet that sends; an exception propagates to the sender.

- ``run_started(run)``: a run started (its user message and run row are stored);
- ``run_finished(run)``: its outcome is recorded (status, stop_reason, message_id set);
- ``message_saved(owner, session_id=, message_id=, role=)``: a run stored a message;
- ``session_deleted(owner, session_id=, images=[file names])``: a session's records are gone;
- ``closed()``: the engine closed (the worker's end, or a test's app): parts with processes end them.
"""

from __future__ import annotations

from typing import Any, Callable, List

Receiver = Callable[..., Any]


class Hook:
    """One lifecycle point and its receivers."""

    def __init__(self, name: str):
        self.name = name
        self.receivers: List[Receiver] = []

    def connect(self, receiver: Receiver) -> Receiver:
        """Call ``receiver`` on every ``send`` (once, however often it is connected); returns it."""
        if receiver not in self.receivers:
            self.receivers.append(receiver)
        return receiver

    def disconnect(self, receiver: Receiver) -> None:
        """Stop calling ``receiver``."""
        if receiver in self.receivers:
            self.receivers.remove(receiver)

    def send(self, *args: Any, **kwargs: Any) -> None:
        """Call every receiver with these arguments."""
        for receiver in list(self.receivers):
            receiver(*args, **kwargs)


class EngineHooks:
    """The hooks of one run engine (see the module docstring)."""

    def __init__(self) -> None:
        self.run_started = Hook("run_started")
        self.run_finished = Hook("run_finished")
        self.message_saved = Hook("message_saved")
        self.session_deleted = Hook("session_deleted")
        self.closed = Hook("closed")
