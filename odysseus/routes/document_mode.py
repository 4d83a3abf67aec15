"""Documents in a turn: the tools, the active-document context, and chat mode with ``active_doc_id``.

- Agent mode gets the four document tools beside its own (``with_document_tools``) and,
  when a document is active, the document as context (``add_context``).
- Chat mode with ``active_doc_id`` (``build_document_chat_turn``) runs the agent loop
  with only the document tools: the model may answer in text, or write the document
  through a tool; nothing else is offered. It ends with ``chat_terminal`` like any chat turn.

``active_doc_id`` is checked (the caller's own document, else 404) before anything is stored.
"""

from __future__ import annotations

import dataclasses
from typing import List, Optional, Tuple

from flask import current_app

from ..agent.agent_loop import agent_turn, initial_state
from ..turns.messages import model_messages
from ..context.agent_context import with_context
from ..documents.context import with_document
from ..documents.tools import ActiveDocument, document_tools
from ..tools import ToolRegistry
from .params import optional_str
from .turn_registry import PreparedTurn, context_gather
from .window_routes import turn_window

CHAT_PROMPT = (
    "You are Odysseus, a helpful assistant. The user is working on a document with you. Answer in "
    "the chat; when the user asks for a change to the document, make it with a document tool."
)


def _docs():
    return current_app.extensions["odysseus.documents"]


def requested_document(data: dict, owner: str) -> Optional[str]:
    """The request's ``active_doc_id`` after the owner check (NotFound for a foreign or unknown id)."""
    doc_id = optional_str(data, "active_doc_id", 200)
    if doc_id:
        _docs().repo.get(owner, doc_id)
    return doc_id


def with_document_tools(registry: ToolRegistry, data: dict, owner: str) -> Tuple[ToolRegistry, ActiveDocument]:
    """``registry`` plus the document tools for this turn, and the turn's active-document state."""
    docs = _docs()
    active = ActiveDocument(docs, requested_document(data, owner))
    return ToolRegistry([*registry.tools.values(), *document_tools(docs, active)]), active


def add_context(messages: List[dict], active: ActiveDocument, owner: str, history: List[dict]) -> List[dict]:
    """The model messages with the active document (line-numbered, untrusted) before the user's message."""
    session_id = history[-1]["session_id"] if history else None
    return with_document(messages, active.get(owner, session_id), _docs().context_chars)


def document_adder(active: ActiveDocument, owner: str, history: List[dict]):
    """``add_context`` with the document read now (inside the app): for rebuilding messages later in the run."""
    session_id = history[-1]["session_id"] if history else None
    doc, budget = active.get(owner, session_id), _docs().context_chars
    return lambda messages: with_document(messages, doc, budget)


def build_document_chat_turn(req: dict, candidates, owner: str) -> PreparedTurn:
    """Chat mode with an open document: the agent loop with the document tools only."""
    agent = current_app.extensions["odysseus.agent"]
    docs = _docs()
    active = ActiveDocument(docs, requested_document(req["data"], owner))
    registry = ToolRegistry(document_tools(docs, active))
    prompt = f"{req['system_prompt']}\n\n{CHAT_PROMPT}" if req.get("system_prompt") else CHAT_PROMPT
    settings = dataclasses.replace(agent.settings, system_prompt=prompt, max_nudges=0)

    gather = context_gather(req, owner)  # the other context sources (attachments, ...) as in plain chat
    window = turn_window(req, candidates)  # the model's window: compaction, trimming (issue 17)

    def make_turn(history):
        state = initial_state(history, settings)
        with_doc = document_adder(active, owner, history)
        state["messages"] = with_doc(state["messages"])
        loop = agent_turn(candidates, registry, settings, agent.hooks, state, None, req.get("temperature"))

        def build(rows):  # the messages from the rows the model sees (after a summary)
            return with_doc(model_messages(rows, settings.system_prompt))

        return with_context(loop, state, gather, window=window, history=history, build=build)

    return PreparedTurn(req["message"], req["client_message_id"], make_turn)
