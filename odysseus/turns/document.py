"""Documents in a turn: the tools, the active-document context, and chat mode with ``active_doc_id``.

- Agent mode gets the four document tools beside its own (``tools_of``) and,
  when a document is active, the document as context (``document_adder``).
- Chat mode with ``active_doc_id`` (``build_document_chat_turn``) runs the agent loop
  with only the document tools: the model may answer in text, or write the document
  through a tool; nothing else is offered. It ends with ``chat_terminal`` like any chat turn.

``active_doc_id`` is checked (the caller's own document, else 404) before anything is stored.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, TYPE_CHECKING

from ..agent.agent_loop import agent_turn, initial_state
from ..context.agent_context import with_context
from ..documents.context import with_document
from ..documents.service import Documents
from ..documents.tools import ActiveDocument, document_tools
from ..llm.llm_core import Candidate
from ..tools import Tool, ToolRegistry
from ..runs.start import Turn
from .messages import model_messages
from .registry import PreparedTurn
from .request import TurnRequest

if TYPE_CHECKING:
    from .start import TurnService

CHAT_PROMPT = (
    "You are Odysseus, a helpful assistant. The user is working on a document with you. Answer in "
    "the chat; when the user asks for a change to the document, make it with a document tool."
)


def active_document(docs: Documents, request: TurnRequest, owner: str) -> ActiveDocument:
    """The turn's active-document state, after the owner check of ``active_doc_id`` (NotFound for a
    foreign or unknown id)."""
    if request.active_doc_id:
        docs.repo.get(owner, request.active_doc_id)
    return ActiveDocument(docs, request.active_doc_id)


def tools_of(docs: Documents, active: ActiveDocument) -> List[Tool]:
    """The four document tools of this turn, bound to its active document."""
    return document_tools(docs, active)


def document_adder(
    docs: Documents, active: ActiveDocument, owner: str, history: List[Dict[str, Any]]
) -> Callable[[List[Dict[str, Any]]], List[Dict[str, Any]]]:
    """The model messages with the active document (line-numbered, untrusted) before the user's message,
    the document read now: for rebuilding messages later in the run."""
    session_id = history[-1]["session_id"] if history else None
    doc, budget = active.get(owner, session_id), docs.context_chars
    return lambda messages: with_document(messages, doc, budget)


def build_document_chat_turn(
    turns: "TurnService", request: TurnRequest, candidates: List[Candidate], owner: str
) -> PreparedTurn:
    """Chat mode with an open document: the agent loop with the document tools only."""
    agent, docs = turns.agent, turns.documents
    active = active_document(docs, request, owner)
    registry = ToolRegistry(tools_of(docs, active))
    prompt = f"{request.system_prompt}\n\n{CHAT_PROMPT}" if request.system_prompt else CHAT_PROMPT
    settings = dataclasses.replace(agent.settings, system_prompt=prompt, max_nudges=0)

    gather = turns.gather(owner, request)  # the other context sources (attachments, ...) as in plain chat
    window = turns.window(request, candidates)  # the model's window: compaction, trimming (issue 17)

    def make_turn(history: List[Dict[str, Any]]) -> Turn:
        state = initial_state(history, settings)
        with_doc = document_adder(docs, active, owner, history)
        state["messages"] = with_doc(state["messages"])
        loop = agent_turn(candidates, registry, settings, agent.hooks, state, None, request.temperature)

        def build(
            rows: List[Dict[str, Any]],
        ) -> List[Dict[str, Any]]:  # the messages from the rows the model sees (after a summary)
            return with_doc(model_messages(rows, settings.system_prompt))

        return with_context(loop, state, gather, window=window, history=history, build=build)

    return PreparedTurn(request.message, request.client_message_id, make_turn)
