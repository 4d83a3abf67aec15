"""Workspace selection: an agent turn's ``workspace: "<path>"`` points its file and code tools at a
host directory instead of the session's own workspace.

Only an admin (or the owner in single-user mode, ``AUTH=none``) may choose one; for anybody else
the field is ignored silently, so nobody can probe which host paths exist. The path is resolved
(symlinks followed) before it is judged; it must be an existing directory and must not be:

- a filesystem root (``/``);
- the data directory, inside it, or a directory containing it (the database lives there);
- a directory containing the database file, wherever ``DATABASE`` points;
- the server's own code (the checkout or installed package), its virtualenv, inside either or a
  directory containing either;
- a home directory or a directory containing one (its dot-folders: ``~/.ssh``, ``~/.config``, ...);
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
import pwd
import sys
from typing import Any, Dict, List, Optional, Tuple

from ..events import WORKSPACE_REJECTED, Event
from . import ContextRequest, Injection, pipeline_of

SOURCE = "workspace"
SENSITIVE = ("/etc", "/proc", "/sys", "/dev", "/boot", "/run")
MAX_PATH = 4096


def _inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip(os.sep) + os.sep)


#: the server's own code: the directory holding the ``odysseus`` package (the checkout, or site-packages)
CODE_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def _homes() -> List[str]:
    """Home directories of this machine's accounts (and the server's own), resolved; never ``/``."""
    found = {os.path.expanduser("~")}
    try:
        found |= {entry.pw_dir for entry in pwd.getpwall()}
    except OSError:  # no passwd database (a minimal container): the server's own home still counts
        pass
    homes = []
    for home in found:
        resolved = os.path.realpath(home) if home else ""
        if resolved and os.path.dirname(resolved) != resolved and os.path.isdir(resolved):
            homes.append(resolved)
    return homes


def _protected(resolved: str, database: Optional[str]) -> Optional[str]:
    """Why ``resolved`` touches the server's own files or an account's home, else None."""
    code = os.path.realpath(CODE_DIR)
    if _inside(resolved, code) or _inside(code, resolved):
        return "the workspace may not contain or be inside the server's own code"
    venv = os.path.realpath(sys.prefix)
    if os.path.dirname(venv) != venv and (_inside(resolved, venv) or _inside(venv, resolved)):
        return "the workspace may not contain or be inside the server's Python environment"
    if database and _inside(os.path.realpath(database), resolved):
        return "the workspace may not contain the database file"
    for home in _homes():
        if _inside(home, resolved):
            return "the workspace may not be or contain a home directory (its dot-folders hold keys and settings)"
    return None


def judge(path: Any, data_dir: str, database: Optional[str] = None) -> Tuple[Optional[str], Optional[str]]:
    """(resolved directory, None) when ``path`` may be a workspace, else (None, why not).

    ``database`` is the SQLite file's path when ``DATABASE`` puts it outside ``data_dir``."""
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
    why = _protected(resolved, database)
    if why:
        return None, why
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
    resolved, _ = judge(path, config["DATA_DIR"], database_file(config))
    return resolved or ""


def database_file(config: Any) -> str:
    """The SQLite file's path (``DATABASE``, else ``DATA_DIR/odysseus.db``), as the store opens it."""
    return str(config.get("DATABASE") or os.path.join(config["DATA_DIR"], "odysseus.db"))


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
        resolved, why = judge(requested, self.config["DATA_DIR"], database_file(self.config))
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


def browse(path: str, data_dir: str, limit: int, database: Optional[str] = None) -> dict:
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
            ok, _ = judge(full, data_dir, database)
            entries.append({"name": entry.name, "path": full, "selectable": ok is not None})
    parent = os.path.dirname(resolved)
    here, _ = judge(resolved, data_dir, database)
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
