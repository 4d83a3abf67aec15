"""What a /v1 response or completion fixes when it is created: its ids, model and request options.

Stored once with the run (``odysseus.openai_api.store``) and read back by every projection of it, so
the response object and the stream events carry the same fields however and wherever they are made.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

#: the ids of a run and of what the OpenAI-compatible API calls it share their random part
RESPONSE_PREFIX = "resp_"
COMPLETION_PREFIX = "chatcmpl-"
RUN_PREFIX = "run_"

RESPONSE = "response"
CHAT_COMPLETION = "chat.completion"


def run_id_of(object_id: str) -> Optional[str]:
    """The run behind a response or completion id (None when the id has neither prefix)."""
    for prefix in (RESPONSE_PREFIX, COMPLETION_PREFIX):
        if object_id.startswith(prefix) and len(object_id) > len(prefix):
            return RUN_PREFIX + object_id[len(prefix) :]
    return None


def object_id(kind: str, run_id: str) -> str:
    """The response (``resp_...``) or completion (``chatcmpl-...``) id of a run."""
    prefix = RESPONSE_PREFIX if kind == RESPONSE else COMPLETION_PREFIX
    return prefix + run_id[len(RUN_PREFIX) :]


@dataclass(frozen=True)
class ResponseHead:
    """The fixed part of a response object (Responses) or completion (Chat Completions)."""

    id: str
    kind: str  # RESPONSE or CHAT_COMPLETION
    created_at: float
    #: the model as the client named it (a route, ``provider/model``, ``agent:<id>`` or ``workflow:<id>``)
    model: str
    instructions: Optional[str] = None
    metadata: Dict[str, str] = field(default_factory=dict)
    temperature: Optional[float] = None
    top_p: Optional[float] = None
    max_output_tokens: Optional[int] = None
    #: client tools as the client sent them (Responses shape: ``{"type": "function", "name", ...}``)
    tools: List[Dict[str, Any]] = field(default_factory=list)
    tool_choice: Any = "auto"
    parallel_tool_calls: bool = True
    previous_response_id: Optional[str] = None
    background: bool = False
    store: bool = True
    #: Chat Completions: send a usage chunk before ``[DONE]`` (``stream_options.include_usage``)
    include_usage: bool = False

    @property
    def suffix(self) -> str:
        """The random part of the id (shared with the run id)."""
        prefix = RESPONSE_PREFIX if self.kind == RESPONSE else COMPLETION_PREFIX
        return self.id[len(prefix) :]

    def response(self, status: str) -> Dict[str, Any]:
        """The response object's fixed fields, with ``status``."""
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "background": self.background,
            "model": self.model,
            "instructions": self.instructions,
            "metadata": dict(self.metadata),
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_output_tokens": self.max_output_tokens,
            "tools": [dict(tool) for tool in self.tools],
            "tool_choice": self.tool_choice,
            "parallel_tool_calls": self.parallel_tool_calls,
            "previous_response_id": self.previous_response_id,
            "store": self.store,
            "text": {"format": {"type": "text"}},
            "truncation": "disabled",
            "reasoning": None,
            "user": None,
            "output": [],
            "error": None,
            "incomplete_details": None,
            "usage": None,
            "completed_at": None,
        }

    def to_json(self) -> Dict[str, Any]:
        """The stored form."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "ResponseHead":
        """The head ``to_json`` stored."""
        names = cls.__dataclass_fields__.keys()
        return cls(**{k: v for k, v in data.items() if k in names})
