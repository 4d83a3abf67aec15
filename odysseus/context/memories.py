"""Memories in the context: every pinned memory plus the few recalled for this message.

A turn uses memories unless its body says ``use_memory: false`` or the user turned memory off
(``store.memories.settings(owner)["enabled"]``). The chosen rows go to the model as one
untrusted context block, are announced with ``memories_used`` before the first delta, are kept
in the reply's metadata (``memories_used``) so the page shows the same pill after a reload, and
each one's ``uses`` and ``last_used_at`` count up.

``MemoryBook`` is one owner's memories for the agent's ``manage_memory`` tool (no Flask, no SQL
beyond the repository).
"""

from __future__ import annotations

from typing import Any, Dict, List

from ..errors import BadRequest
from ..events import MEMORIES_USED, Event
from ..store.memories import clean_memory
from . import ContextRequest, Injection, pipeline_of, untrusted_block
from .flags import defang

SOURCE = "memories"


def used_row(memory: dict, kind: str) -> dict:
    """The ``memories_used`` entry for one memory."""
    return {"id": memory["id"], "text": memory["text"], "category": memory["category"], "type": kind}


class MemorySource:
    """The context source for memories (see the module docstring)."""

    name = SOURCE

    def __init__(self, repo, config: dict):
        self.repo = repo
        self.config = config

    def check(self, request: ContextRequest) -> Dict[str, Any]:
        """Nothing to check (``use_memory`` is parsed with the request)."""
        return {}

    def choose(self, owner: str, message: str) -> List[dict]:
        """Pinned memories then recalled ones, as ``memories_used`` rows, within the character budget."""
        config = self.config
        rows = [used_row(m, "pinned") for m in self.repo.pinned(owner, int(config["MEMORY_PINNED_LIMIT"]))]
        recalled = self.repo.recall(
            owner, message, int(config["MEMORY_RECALL_LIMIT"]), float(config["MEMORY_RECALL_MIN_SCORE"])
        )
        rows += [used_row(m, "recalled") for m in recalled]
        budget, kept = int(config["MEMORY_CONTEXT_CHARS"]), []
        for row in rows:
            budget -= len(row["text"]) + len(row["category"]) + 8
            if budget < 0:
                break
            kept.append(row)
        return kept

    def gather(self, request: ContextRequest) -> List[Injection]:
        """This turn's memories (nothing when switched off for the turn or for the user)."""
        if request.mode not in ("chat", "agent"):
            return []
        if request.options.use_memory is False:  # also: automatic extraction skips this turn
            return [Injection(SOURCE, metadata={"use_memory": False})]
        enabled, any_memory = self.repo.turn_state(request.owner)  # [startpath] one statement for most users
        if not enabled or not any_memory:
            return []
        rows = self.choose(request.owner, request.message)
        if not rows:
            return []
        self.repo.mark_used(request.owner, [row["id"] for row in rows])
        # Two injections: pinned memories are never trimmed away (score None), recalled ones may be
        # (context/trim.py); the window merges their memories_used events back into one.
        out = []
        for kind, score in (("pinned", None), ("recalled", 0.8)):
            chosen = [row for row in rows if row["type"] == kind]
            if not chosen:
                continue
            lines = defang("\n".join(f"- ({row['category']}) {row['text']}" for row in chosen))
            text = untrusted_block(
                "memories",
                "Facts the user asked to be remembered about them and their preferences (use when relevant):\n" + lines,
            )
            out.append(
                Injection(
                    SOURCE,
                    event=Event(MEMORIES_USED, {"data": chosen}),
                    text=text,
                    score=score,
                    metadata={"memories_used": chosen},
                )
            )
        return out


class MemoryBook:
    """One owner's memories, for the agent's ``manage_memory`` tool."""

    def __init__(self, repo, owner: str, limit: int):
        self.repo, self.owner, self.limit = repo, owner, limit

    def list(self) -> List[dict]:
        """Every memory of the owner."""
        return self.repo.list(self.owner)

    def search(self, query: str) -> List[dict]:
        """Full-text search over the owner's memories."""
        return self.repo.search(self.owner, query)

    def add(self, fields: dict) -> dict:
        """Store a memory written by the model (source ``auto``); raises BadRequest for bad fields."""
        return self.repo.add(self.owner, clean_memory(fields, partial=False), source="auto", limit=self.limit)

    def edit(self, memory_id: str, fields: dict) -> dict:
        """Change one of the owner's memories (NotFound for other ids)."""
        return self.repo.update(self.owner, memory_id, clean_memory(fields, partial=True))

    def delete(self, memory_id: str) -> None:
        """Delete one of the owner's memories (NotFound for other ids)."""
        self.repo.delete(self.owner, memory_id)


def memory_book(store, config: dict, owner: str) -> MemoryBook:
    """The owner's ``MemoryBook`` (for ``ToolContext.memory``)."""
    return MemoryBook(store.memories, owner, int(config["MEMORY_MAX_PER_USER"]))


def settings_changes(data: dict) -> dict:
    """Validate a memory-settings body (``enabled``, ``auto_extract``); raises BadRequest."""
    changes = {}
    for key in ("enabled", "auto_extract"):
        if key in data:
            if not isinstance(data[key], bool):
                raise BadRequest(f"{key} must be true or false")
            changes[key] = data[key]
    if not changes:
        raise BadRequest("nothing to change (enabled, auto_extract)")
    return changes


def init_app(app) -> None:
    """Add the memory source to the app's context pipeline and start listening for extraction."""
    from .memory_extract import Extractor

    store = app.extensions["odysseus.store"]
    pipeline_of(app.extensions).add(MemorySource(store.memories, app.config))
    app.extensions["odysseus.memory_extractor"] = Extractor.connect(app)
