"""The app's parts as the routes reach them: ``app.extensions["odysseus.<name>"]`` of the current app."""

from __future__ import annotations

from typing import Any

from flask import current_app

from ..turns.start import TurnService


def ext(name: str) -> Any:
    """A per-app part from ``app.extensions``."""
    return current_app.extensions[f"odysseus.{name}"]


def turns() -> TurnService:
    """The app's turn service (``turns/start.py``): every turn starts there."""
    return current_app.extensions["odysseus.turns"]
