"""The mode table: which builder prepares a turn of each mode, and what a builder returns.

A builder validates its mode's own input (raising ``BadRequest`` / ``NotFound`` before anything
is stored) and returns a ``PreparedTurn``: the user's message to store, the writes that must
commit with the start (``in_transaction``), and how to make the turn generator from the session
history. Each mode's module registers its builder from its ``init_app`` with
``register_mode(app, mode, builder)``; ``TurnService.start_turn`` calls it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from ..errors import BadRequest
from ..events import CHAT_TERMINAL
from ..llm.llm_core import Candidate
from ..runs.engine import Turn
from .request import RoutedAgent, TurnRequest


@dataclass
class PreparedTurn:
    """A validated request, ready to store its user message and run."""

    message: Optional[str]  # None stores no user message (a regenerate answers a stored one)
    client_message_id: Optional[str]
    make_turn: Callable[[List[Dict[str, Any]]], Turn]
    terminal_type: str = CHAT_TERMINAL
    user_metadata: Optional[Dict[str, Any]] = None
    #: writes that commit (or roll back) with the start, e.g. consuming an approval
    in_transaction: List[Callable[[Any], None]] = field(default_factory=list)
    #: who answers, when the builder chose (a workflow's supervisor); else the request's ``agent``
    agent: Optional[RoutedAgent] = None

    def turn(self, history: List[Dict[str, Any]]) -> Turn:
        """The turn generator over the session history (which ends with the user's message)."""
        return self.make_turn(history)


#: (the app's ``TurnService`` (turns/start.py, which imports this module), the request, the model
#: route's candidates, the owner) -> PreparedTurn
Builder = Callable[[Any, TurnRequest, List[Candidate], str], PreparedTurn]


class ModeTable:
    """The modes one app serves, each with its builder."""

    def __init__(self) -> None:
        self.builders: Dict[str, Builder] = {}

    def register(self, mode: str, builder: Builder) -> None:
        """Serve ``mode`` with ``builder``."""
        self.builders[mode] = builder

    def __contains__(self, mode: object) -> bool:
        return mode in self.builders

    def names(self) -> List[str]:
        """The registered modes."""
        return list(self.builders)

    def builder(self, mode: str) -> Builder:
        """The builder of ``mode``; BadRequest when this server does not serve it."""
        builder = self.builders.get(mode)
        if builder is None:
            raise BadRequest(f"mode {mode!r} is not available on this server")
        return builder


def register_mode(app: Any, mode: str, builder: Builder) -> None:
    """Serve ``mode`` with ``builder`` on ``app``'s turn service."""
    app.extensions["odysseus.turns"].modes.register(mode, builder)
