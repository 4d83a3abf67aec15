"""One app's agent parts: settings, the toolbox, and the storage hooks the loop calls. No Flask.

Built once per app (``turns/agent.py``'s ``init_app``) and kept in
``app.extensions["odysseus.agent"]``. Fail closed: without a working sandbox the code tools
are not in the toolbox at all.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, List, Optional

from ..context.memories import memory_book
from ..context.workspace import chosen_workspace
from ..runs.run import RunContext
from ..tools import ToolContext, ToolRegistry, build_registry
from ..tools.code import CODE_TOOL_NAMES
from ..tools.image_store import ImageStore
from ..tools.registry import safe_segment
from ..tools.sandbox import startup_status
from .agent_loop import AgentHooks
from .approvals import call_hash, new_approval_id
from .guards import AgentSettings
from .toolbox import Toolbox


class AgentService:
    """Per-app agent state: settings, the toolbox, and the storage hooks the loop uses."""

    def __init__(self, store: Any, config: dict):
        self.config = config
        self.store = store
        self.settings = AgentSettings.from_config(config)
        registry = build_registry(config)
        self.sandbox = startup_status(config)
        if not self.sandbox.available:
            registry = ToolRegistry(t for n, t in registry.tools.items() if n not in CODE_TOOL_NAMES)
        #: the app's tools and the tool sources added at start-up (``Toolbox.add_source``)
        self.toolbox = Toolbox(registry, store, config)
        self.data_dir = config["DATA_DIR"]
        self.images = ImageStore(store, self.data_dir)
        self.hooks = AgentHooks(
            request_approval=self.request_approval, tool_context=self.tool_context, amend_exhibit=self.amend_exhibit
        )

    @property
    def registry(self) -> ToolRegistry:
        """The app's own tools (those ``AGENT_TOOLS`` enables and the sandbox allows)."""
        return self.toolbox.registry

    def amend_exhibit(self, ctx: RunContext, exhibit: dict) -> None:
        """Replace an exhibit with the same id in the session's earlier saved replies."""
        self.store.messages.amend_exhibit(ctx.owner, ctx.session_id, exhibit)

    def request_approval(self, ctx: RunContext, call: dict, state: dict) -> dict:
        """Persist an approval request with the continuation state."""
        row = self.store.approvals.create(
            approval_id=new_approval_id(),
            owner=ctx.owner,
            session_id=ctx.session_id,
            run_id=ctx.run_id,
            call=call,
            call_hash=call_hash(call),
            state=state,
            ttl=self.settings.approval_ttl,
        )
        return {"approval_id": row["id"], "expires_at": row["expires_at"]}

    def tool_context(self, ctx: RunContext, network: bool = False) -> ToolContext:
        """The context tools of this run get: workspace root, config, image storage, sandbox network."""
        return ToolContext(
            owner=ctx.owner,
            session_id=ctx.session_id,
            cancel=ctx.cancel,
            config=dict(self.config),
            workspace_root=os.path.join(self.data_dir, "workspaces"),
            save_image=lambda data, mime: self.save_image(ctx.owner, ctx.session_id, data, mime),
            # context/workspace.py: a chosen host directory (judged again); memories for manage_memory
            workspace_dir=chosen_workspace(ctx.metadata, self.config),
            memory=memory_book(self.store, self.config, ctx.owner),
            network=network,
        )

    def save_image(self, owner: str, session_id: Optional[str], data: bytes, mime: str) -> str:
        """Store image bytes under DATA_DIR/images, record the owner, return our URL."""
        return self.images.save(owner, session_id, data, mime)

    def forget_session(self, owner: str, session_id: str, images: List[str]) -> None:
        """A session was deleted (the engine's ``session_deleted`` hook): remove its images and workspace."""
        self.images.forget(images)
        workspace = os.path.join(self.data_dir, "workspaces", safe_segment(owner), safe_segment(session_id))
        shutil.rmtree(workspace, ignore_errors=True)
