"""Which turn a request runs, by ``mode``: the builders registered on the app's run engine.

A builder validates its mode's extra input (raising BadRequest before anything is
stored) and returns a ``PreparedTurn``: the user's message to store, the writes that must
commit with the start (``in_transaction``), and how to make the turn generator from the
session history. Chat mode is registered here; agent mode registers itself from its own
``init_app`` with ``register_mode(app, "agent", builder)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional

from flask import Flask, current_app

from ..turns.chat import chat_turn
from ..context import ContextRequest, pipeline_of
from ..errors import BadRequest
from ..events import CHAT_TERMINAL
from ..llm.llm_core import Candidate
from ..runs.engine import Turn


@dataclass
class PreparedTurn:
    """A validated request, ready to store its user message and run."""

    message: Optional[str]  # None stores no user message (a regenerate answers a stored one)
    client_message_id: Optional[str]
    make_turn: Callable[[List[dict]], Turn]
    terminal_type: str = CHAT_TERMINAL
    user_metadata: Optional[dict] = None
    #: writes that commit (or roll back) with the start, e.g. consuming an approval
    in_transaction: List[Callable[[Any], None]] = field(default_factory=list)

    def turn(self, history: List[dict]) -> Turn:
        """The turn generator over the session history (which ends with the user's message)."""
        return self.make_turn(history)


Builder = Callable[[dict, List[Candidate], str], PreparedTurn]


def context_gather(req: dict, owner: str):
    """The run-time half of the app's context pipeline for this request (see ``odysseus.context``)."""
    pipeline = pipeline_of(current_app.extensions)

    def gather(ctx):
        return pipeline.gather(
            ContextRequest(
                owner=owner,
                session_id=ctx.session_id,
                mode=req["mode"],
                message=req["message"],
                data=req["data"],
                cancel=ctx.cancel,
            )
        )

    return gather


def _chat_builder(req: dict, candidates: List[Candidate], owner: str) -> PreparedTurn:
    if req["data"].get("active_doc_id"):  # an open editor document: chat with the document tools (document_mode.py)
        from .document_mode import build_document_chat_turn

        return build_document_chat_turn(req, candidates, owner)
    gather = context_gather(req, owner)
    from .window_routes import turn_window  # the model's window: compaction, trimming (issue 17)

    window = turn_window(req, candidates)
    return PreparedTurn(
        req["message"],
        req["client_message_id"],
        lambda history: chat_turn(
            candidates, history, req["temperature"], req.get("system_prompt"), gather=gather, window=window
        ),
    )


def register_mode(app: Flask, mode: str, builder: Builder) -> None:
    """Serve ``mode`` with ``builder`` on ``app``'s run engine."""
    app.extensions["odysseus.runs"].register_mode(mode, builder)


def init_app(app: Flask) -> None:
    """Register chat mode."""
    register_mode(app, "chat", _chat_builder)


def build_turn(req: dict, candidates: List[Candidate], owner: str) -> PreparedTurn:
    """The prepared turn for the request's mode."""
    builder = current_app.extensions["odysseus.runs"].modes.get(req["mode"])
    if builder is None:
        raise BadRequest(f"mode {req['mode']!r} is not available on this server")
    return builder(req, candidates, owner)
