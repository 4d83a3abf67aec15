"""Workspace selection: an agent turn's ``workspace: "<path>"`` points its file and code tools at a
host directory instead of the session's own workspace.

Only an admin (or the owner in single-user mode, ``AUTH=none``) may choose one; for anybody else
the field is ignored silently, so nobody can probe which host paths exist. The path is resolved
(symlinks followed) before it is judged; it must be an existing directory and must not be:

- a filesystem root (``/``);
- the data directory, inside it, or a directory containing it (the database lives there);
- inside ``/etc``, ``/proc``, ``/sys``, ``/dev``, ``/boot`` or ``/run``;
- a dot-directory or inside one (``~/.ssh``, ``~/.config``, ...).

A rejected path makes ``workspace_rejected`` (``{"path": <as requested>}``) the first event and a
notice saying why; the turn goes on with the session workspace. An accepted one is recorded in
the reply's metadata (``workspace``), carried in a paused task's state, and checked again when
the tools get their context (``chosen_workspace``), so a directory swapped for a symlink later is
not followed.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

from ..events import WORKSPACE_REJECTED, Event
from . import ContextRequest, Injection, pipeline_of

SOURCE = "workspace"
SENSITIVE = ("/etc", "/proc", "/sys", "/dev", "/boot", "/run")
MAX_PATH = 4096


def _inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip(os.sep) + os.sep)


def judge(path: Any, data_dir: str) -> Tuple[Optional[str], Optional[str]]:
    """(resolved directory, None) when ``path`` may be a workspace, else (None, why not)."""
    if not isinstance(path, str) or not path.strip():
        return None, "the workspace must be a non-empty path"
    if len(path) > MAX_PATH or "\x00" in path:
        return None, "the workspace path is not valid"
    if not os.path.isabs(path):
        return None, "the workspace must be an absolute path"
    resolved = os.path.realpath(path)
    if not os.path.exists(resolved):
        return None, "the workspace does not exist"
    if not os.path.isdir(resolved):
        return None, "the workspace is not a directory"
    if os.path.dirname(resolved) == resolved:
        return None, "a filesystem root cannot be the workspace"
    data = os.path.realpath(data_dir)
    if _inside(resolved, data) or _inside(data, resolved):
        return None, "the workspace may not contain or be inside the data directory"
    for sensitive in SENSITIVE:
        if _inside(resolved, os.path.realpath(sensitive)) or _inside(resolved, sensitive):
            return None, f"the workspace may not be inside {sensitive}"
    if any(part.startswith(".") for part in resolved.split(os.sep) if part):
        return None, "the workspace may not be a dot-directory or inside one"
    return resolved, None


def may_choose(store, config: dict, owner: str) -> bool:
    """True for an admin, and for the owner in single-user mode."""
    if str(config.get("AUTH") or "").lower() == "none":
        return True
    user = store.users.get(owner)
    return bool(user and user["is_admin"])


def chosen_workspace(metadata: Dict[str, Any], config: dict) -> str:
    """The accepted workspace recorded in a run's metadata, judged again; "" for the session workspace."""
    path = metadata.get(SOURCE)
    if not path:
        return ""
    resolved, _ = judge(path, config["DATA_DIR"])
    return resolved or ""


class WorkspaceSource:
    """The context source for ``workspace`` (see the module docstring)."""

    name = SOURCE

    def __init__(self, store, config: dict):
        self.store = store
        self.config = config

    def check(self, request: ContextRequest) -> Dict[str, Any]:
        """Nothing is refused at request time: a rejected path is announced inside the run."""
        return {}

    def gather(self, request: ContextRequest) -> List[Injection]:
        """Accept or reject the requested workspace (agent mode, privileged callers only)."""
        requested = request.options.workspace
        if request.mode != "agent" or not requested:
            return []
        if not may_choose(self.store, self.config, request.owner):
            return []  # silently: nobody else learns which host paths exist
        resolved, why = judge(requested, self.config["DATA_DIR"])
        if resolved is None:
            shown = requested if isinstance(requested, str) else str(requested)
            message = f"The workspace was not used ({why}); the session workspace is used instead."
            return [
                Injection(
                    SOURCE,
                    event=Event(WORKSPACE_REJECTED, {"data": {"path": shown[:MAX_PATH]}}),
                    notice=message,
                    metadata={"workspace_rejected": {"path": shown[:MAX_PATH], "notice": message}},
                )
            ]
        return [Injection(SOURCE, metadata={SOURCE: resolved})]


def browse(path: str, data_dir: str, limit: int) -> dict:
    """The sub-directories of ``path`` for the page's picker, each marked ``selectable`` (judge)."""
    resolved = os.path.realpath(path)
    entries: List[dict] = []
    truncated = False
    with os.scandir(resolved) as listing:
        for entry in sorted(listing, key=lambda e: e.name.lower()):
            if entry.name.startswith("."):
                continue
            try:
                if not entry.is_dir():
                    continue
            except OSError:
                continue
            if len(entries) >= limit:
                truncated = True
                break
            full = os.path.join(resolved, entry.name)
            ok, _ = judge(full, data_dir)
            entries.append({"name": entry.name, "path": full, "selectable": ok is not None})
    parent = os.path.dirname(resolved)
    here, _ = judge(resolved, data_dir)
    return {
        "path": resolved,
        "parent": parent if parent != resolved else None,
        "selectable": here is not None,
        "entries": entries,
        "truncated": truncated,
    }


def init_app(app) -> None:
    """Add the workspace source to the app's context pipeline (first, so its event comes first)."""
    pipeline_of(app.extensions).add(WorkspaceSource(app.extensions["odysseus.store"], app.config))
