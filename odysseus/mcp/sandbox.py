"""stdio MCP servers in the code tools' bubblewrap sandbox (``sandbox = true``, the default). No Flask.

A sandboxed server runs as ``tools/sandbox.py``'s ``sandbox_argv`` runs code: fresh namespaces, an
unprivileged uid, ``/usr`` and the interpreter's prefix read-only, a private ``/tmp``, no ``/etc``,
no data directory, no home, its own ``/proc``, and it dies with its parent. On top of that:

- its own installation, read-only at its own path: the virtualenv (the directory with
  ``pyvenv.cfg``) or the ``node_modules`` the command lives in (its real path, symlinks followed),
  else the command's directory; the same for an argument that is an absolute path to a file
  (``node /opt/x/index.js``, ``python /opt/x/server.py``). A root that is ``/``, the home
  directory, or that holds (or lies inside) ``DATA_DIR`` is refused;
- a private writable directory, ``DATA_DIR/mcp/<name>``, at ``/workspace`` (its cwd and ``HOME``);
- the network only with ``network = true``;
- process, file-size and open-file limits, but no CPU-time or address-space limit (a server lives
  long, and V8 reserves more address space than a code call may use).

Fail closed: when bubblewrap cannot run here, a sandboxed server is unavailable with the reason and
is not started unsandboxed (``sandbox = false`` says that on purpose).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..tools.registry import safe_segment
from ..tools.sandbox import (
    SAFE_PATH,
    WORKSPACE,
    SandboxError,
    SandboxSettings,
    SandboxStatus,
    prepare_workspace,
    probe,
    sandbox_argv,
)
from .servers import ServerSpec

Launch = Tuple[str, List[str], Dict[str, str], Optional[str]]
#: probe results in this process, by settings (without DATA_DIR)
_PROBED: Dict[tuple, SandboxStatus] = {}


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def install_roots(path: str) -> List[str]:
    """Where the program at ``path`` is installed, as named (``.venv/bin/python``) and as it really is
    (the interpreter that symlink points at): each one's ``install_root``."""
    named = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
    roots = [install_root(named, follow=False)]
    real = install_root(path)
    return roots if real in roots else roots + [real]


def install_root(path: str, follow: bool = True) -> str:
    """Where the program at ``path`` is installed: its ``node_modules``, its virtualenv, else its directory."""
    real = os.path.realpath(path) if follow else path
    parts = real.split(os.sep)
    if "node_modules" in parts:
        return os.sep.join(parts[: parts.index("node_modules") + 1]) or os.sep
    folder = os.path.dirname(real)
    probe_dir = folder
    while probe_dir and probe_dir != os.sep:
        if os.path.isfile(os.path.join(probe_dir, "pyvenv.cfg")):
            return probe_dir
        probe_dir = os.path.dirname(probe_dir)
    return folder


def venv_prefix(root: str) -> Optional[str]:
    """The base interpreter's prefix of a virtualenv (its ``pyvenv.cfg`` ``home``'s parent), if any."""
    try:
        with open(os.path.join(root, "pyvenv.cfg"), encoding="utf-8") as fh:
            for line in fh:
                key, _, value = line.partition("=")
                if key.strip() == "home" and value.strip():
                    return os.path.dirname(os.path.realpath(value.strip()))
    except OSError:
        return None
    return None


class McpSandbox:
    """Makes a stdio server's command line: sandboxed (the default) or as given."""

    def __init__(self, config: Mapping[str, Any]):
        self.settings = SandboxSettings.from_config(dict(config))
        self.data_dir = os.path.realpath(str(config.get("DATA_DIR") or "."))

    def status(self) -> SandboxStatus:
        """Whether bubblewrap can run here (probed once per process and settings)."""
        key = (dataclasses.astuple(dataclasses.replace(self.settings, data_dir="", unsandboxed=False)),)
        status = _PROBED.get(key)
        if status is None:
            status = _PROBED[key] = probe(dataclasses.replace(self.settings, unsandboxed=False))
        return status

    def __call__(self, spec: ServerSpec) -> Launch:
        """``(command, args, env, cwd)`` the broker starts for ``spec``; SandboxError when it cannot be."""
        if not spec.sandbox:
            return spec.command, list(spec.args), dict(spec.env), None
        status = self.status()
        if not status.available:
            raise SandboxError(f"sandbox = true, but the sandbox cannot run here: {status.reason}")
        command = self._resolve(spec)
        roots = self._roots([command, *spec.args])
        workspace = self._workspace(spec.name)
        path = ":".join([os.path.join(root, "bin") for root in roots if os.path.isdir(os.path.join(root, "bin"))])
        env = {"PATH": f"{path}:{SAFE_PATH}" if path else SAFE_PATH, **dict(spec.env)}
        limits = [
            f"--nproc={max(256, self.settings.max_processes)}",
            f"--fsize={self.settings.max_file_bytes}",
            f"--nofile={max(1024, self.settings.max_open_files)}",
            "--core=0",
        ]
        argv = sandbox_argv(
            self.settings,
            workspace,
            [command, *spec.args],
            network=spec.network,
            extra_ro=roots,
            env=env,
            limits=limits,
        )
        return argv[0], argv[1:], {"PATH": SAFE_PATH}, None

    def _resolve(self, spec: ServerSpec) -> str:
        command = spec.command
        if os.sep not in command:
            found = shutil.which(command, path=spec.env.get("PATH") or os.environ.get("PATH") or SAFE_PATH)
            if found is None:
                raise SandboxError(f"command not found: {command}")
            command = found
        if not os.path.isabs(command):
            raise SandboxError(f"command must be an absolute path or a name on PATH: {command}")
        if not os.access(command, os.X_OK):
            raise SandboxError(f"command not found or not executable: {command}")
        return command

    def _roots(self, paths: List[str]) -> List[str]:
        """The installations to bind: of the command and of every argument naming an existing file."""
        roots: List[str] = []
        home = os.path.realpath(os.path.expanduser("~"))
        for path in paths:
            if not os.path.isabs(path) or not os.path.isfile(path):
                continue
            found = install_roots(path)
            for root in filter(None, found + [venv_prefix(root) for root in found]):
                if root in roots or _under(root, "/usr"):
                    continue
                if root in (os.sep, home) or _under(self.data_dir, root) or _under(root, self.data_dir):
                    raise SandboxError(f"{root} is too broad to bind into an MCP server's sandbox; install it apart")
                roots.append(root)
        return roots

    def _workspace(self, name: str) -> str:
        """``DATA_DIR/mcp/<name>``, 0700, owned by the sandbox's uid."""
        path = os.path.join(self.data_dir, "mcp")
        os.makedirs(path, mode=0o700, exist_ok=True)
        path = os.path.join(path, safe_segment(name))
        os.makedirs(path, mode=0o700, exist_ok=True)
        prepare_workspace(path, self.settings)
        return path


__all__ = ["McpSandbox", "WORKSPACE", "install_root", "install_roots"]
