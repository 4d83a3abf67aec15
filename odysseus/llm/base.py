"""The provider interface every adapter implements.

A provider turns one ``ChatRequest`` into an iterator of canonical events
(``odysseus.events``): ``delta`` (content or ``thinking``), ``tool_call`` (complete,
with the provider's call id), ``usage``, ``finish`` and ``provider_meta``. It raises a
``odysseus.errors.ProviderError`` subclass on failure and must stop promptly, closing
its connection, when the ``CancelToken`` is cancelled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Protocol

from ..cancel import CancelToken
from ..events import Event


@dataclass
class ChatRequest:
    """What a provider is asked: the model, the messages and the sampling options.

    ``messages`` use the OpenAI chat shape (``role``, ``content``, optional
    ``tool_calls`` / ``tool_call_id``); adapters translate it to their own wire format.
    """

    model: str
    messages: List[dict]
    temperature: Optional[float] = None
    max_tokens: Optional[int] = None
    tools: Optional[List[dict]] = None  # OpenAI function-tool shape
    extra: dict = field(default_factory=dict)


class Provider(Protocol):
    """A configured model server."""

    name: str
    kind: str
    #: the model a request naming only the provider gets (configured, or learnt from the server)
    default_model: Optional[str]
    #: model -> its ``[prices]`` entry (registry.build_providers sets it)
    prices: Dict[str, dict]

    def stream(self, request: ChatRequest, cancel: CancelToken) -> Iterator[Event]:
        """Yield canonical events for one completion."""

    def list_models(self) -> List[str]:
        """Return the model names this provider serves."""


@dataclass
class ProviderConfig:
    """One configured provider: from ``[[providers]]`` tables or conventional env variables."""

    name: str
    kind: str  # "openai", "ollama", "anthropic", "demo"
    base_url: Optional[str] = None
    api_key: Optional[str] = None
    models: List[str] = field(default_factory=list)
    default_model: Optional[str] = None
    options: dict = field(default_factory=dict)

    def public(self) -> dict:
        """A description safe to show a client (no secrets)."""
        return {"name": self.name, "kind": self.kind, "models": list(self.models)}
