"""Compare mode: one model's reply streamed straight from the provider; nothing is stored or detached.

The page sends one ``mode: "compare"`` request per model and keeps the reply it likes with
``POST /api/compare/keep`` (``store/compare_keep.py``). ``start_compare`` checks the model and
the session before the response starts; closing the generator it returns (the client left)
closes the provider's connection.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, TYPE_CHECKING

from ..cancel import CancelToken
from ..events import DONE, ERROR, Event
from ..llm.base import ChatRequest
from ..llm.llm_core import Candidate, stream_route
from .messages import model_messages
from .request import TurnRequest

if TYPE_CHECKING:
    from .start import TurnService


def start_compare(turns: "TurnService", owner: str, request: TurnRequest) -> Iterator[Event]:
    """Validate a compare request (404 for an unknown model or session) and return its events."""
    request, _ = turns.resolve(owner, request)  # the owner's system prompt and temperature
    candidates = turns.router.resolve(request.model)
    history: List[Dict[str, Any]] = []
    if request.session_id:
        turns.store.sessions.get(owner, request.session_id)
        newest = int(turns.config["HISTORY_CONTEXT_MESSAGES"])
        history = turns.store.messages.recent(owner, request.session_id, newest)
    messages = model_messages(history) + [{"role": "user", "content": request.message}]
    chat = ChatRequest(model=candidates[0].model, messages=messages, temperature=request.temperature)
    return _events(candidates, chat)


def _events(candidates: List[Candidate], chat: ChatRequest) -> Iterator[Event]:
    """The provider's events, then ``done``; any failure becomes the stream's ``error`` event."""
    cancel = CancelToken()
    try:
        yield from stream_route(candidates, chat, cancel)
        yield Event(DONE, {})
    except Exception as exc:  # noqa: BLE001 - every failure becomes the stream's error event
        yield Event(ERROR, {"error": getattr(exc, "message", "Internal error"), "status": getattr(exc, "status", 500)})
    finally:
        cancel.cancel("client_gone")  # closes the provider connection when the client leaves
