"""Which tools an agent turn is offered, per owner and profile. No Flask.

``Toolbox.for_turn`` builds one turn's registry, in order:

1. the app's tools (``AGENT_TOOLS``, without the code tools when the sandbox is missing);
2. every tool source's tools for this owner and profile (``add_source``: e.g. MCP servers);
3. the turn's own tools (the document tools of an open document);
4. only the tools an agent profile lists, when it lists any;
5. the code-tools policy (``store.code_access``): ``run_python``/``shell`` only for whom the
   admin allows them, and whether they may reach the network.
"""

from __future__ import annotations

from typing import Any, Collection, Iterable, List, Mapping, Optional, Protocol, Tuple

from ..store.code_access import CodeAccess
from ..tools.code import CODE_TOOL_NAMES
from ..tools.registry import Tool, ToolRegistry


class ToolSource(Protocol):
    """Tools that depend on who asks (e.g. the MCP servers an owner or profile has configured)."""

    name: str

    def tools_for(self, owner: str, profile_id: Optional[str]) -> Iterable[Tool]:
        """The tools this owner's turn (run with this profile, or None) may be offered; fast, no network."""


def decide(store: Any, config: Mapping[str, Any], owner: str, profile_id: Optional[str]) -> CodeAccess:
    """What the code tools policy says for this owner and profile (sandbox availability aside)."""
    user = store.users.get(owner)
    return store.code_access.decide(auth=config["AUTH"], user=user, profile_id=profile_id)


def offer(
    store: Any, config: Mapping[str, Any], registry: ToolRegistry, owner: str, profile_id: Optional[str]
) -> Tuple[ToolRegistry, bool]:
    """The registry a turn is offered (without code tools unless allowed) and whether they get network."""
    access = decide(store, config, owner, profile_id)
    if access.code_tools or not any(name in registry.tools for name in CODE_TOOL_NAMES):
        return registry, access.network
    return ToolRegistry(t for name, t in registry.tools.items() if name not in CODE_TOOL_NAMES), False


class Toolbox:
    """The tools of one app's agent turns: its registry, plus the sources added at start-up."""

    def __init__(self, registry: ToolRegistry, store: Any, config: Mapping[str, Any]):
        self.registry, self.store, self.config = registry, store, config
        self.sources: List[ToolSource] = []

    def add_source(self, source: ToolSource) -> None:
        """Offer ``source``'s tools too (after the app's own, before a turn's own)."""
        self.sources.append(source)

    def for_turn(
        self,
        owner: str,
        profile_id: Optional[str],
        extra: Iterable[Tool] = (),
        only: Optional[Collection[str]] = None,
    ) -> Tuple[ToolRegistry, bool]:
        """One turn's registry (see the module docstring) and whether its code tools get network."""
        tools = list(self.registry.tools.values())
        for source in self.sources:
            tools.extend(source.tools_for(owner, profile_id))
        registry = ToolRegistry([*tools, *extra])
        if only is not None:  # an agent profile limits the tools
            allowed = set(only)
            registry = ToolRegistry(t for name, t in registry.tools.items() if name in allowed)
        return offer(self.store, self.config, registry, owner, profile_id)
