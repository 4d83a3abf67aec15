"""Code tools: ``run_python`` and ``shell``, each call in a fresh bubblewrap sandbox.

The sandbox (``sandbox.py``) sees only ``/usr``, the interpreter, a private ``/tmp`` and the
session's workspace (or an admin's chosen directory, ``odysseus.context.workspace``) at
``/workspace`` (its cwd and HOME), with new user, PID, IPC and network
namespaces and resource limits. The program reaches the sandbox on stdin (``python -``), so the
server never writes a file into a directory the sandboxed code controls. Output is read in
bytes with a cap (``process.py``); stop or timeout kills the whole sandbox.

``CODE_TOOLS_UNSANDBOXED`` (single-user mode only) runs the same commands directly in the
workspace with a stripped environment; it exists for hosts where bubblewrap cannot work.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import List

from .process import run_bounded
from .registry import Tool, ToolContext, ToolError, ToolResult
from .sandbox import (
    SAFE_PATH,
    SandboxError,
    SandboxSettings,
    for_chosen_directory,
    interpreter,
    prepare_workspace,
    sandbox_argv,
)

#: the tools this module provides (removed from the offer when the sandbox is unusable)
CODE_TOOL_NAMES = ("run_python", "shell")
DEFAULT_OUTPUT_MAX_BYTES = 1024 * 1024


def safe_env(workdir: str) -> dict:
    """The unsandboxed subprocess environment: no inherited secrets, HOME in the workdir."""
    return {
        "PATH": SAFE_PATH,
        "HOME": workdir,
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def _stdin_with(text: str):
    """A readable file holding ``text`` at offset 0 (a memfd when the OS has them)."""
    data = text.encode("utf-8")
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("odysseus-code", os.MFD_CLOEXEC)
        handle = os.fdopen(fd, "w+b")
    else:  # pragma: no cover - non-Linux
        handle = tempfile.TemporaryFile()
    handle.write(data)
    handle.flush()
    handle.seek(0)
    return handle


def run_process(command: List[str], ctx: ToolContext, stdin_text: str = "") -> ToolResult:
    """Run ``command`` for this session (sandboxed unless configured otherwise); cap the kept output."""
    settings = SandboxSettings.from_config(ctx.config)
    workdir = ctx.workspace()
    max_bytes = int(ctx.config.get("TOOL_OUTPUT_MAX_BYTES", DEFAULT_OUTPUT_MAX_BYTES))
    # A safety net behind the tool runner's own time limit (which cancels us first).
    timeout = float(ctx.config.get("CODE_TIMEOUT", 30.0)) + 10.0
    try:
        if ctx.workspace_dir:  # an admin's chosen host directory: bound as it is, never re-owned
            settings = for_chosen_directory(workdir, settings)
        else:
            prepare_workspace(workdir, settings)
        if settings.unsandboxed:
            argv, env, cwd = command, safe_env(workdir), workdir
        else:
            argv, env, cwd = sandbox_argv(settings, workdir, command, network=ctx.network), {"PATH": SAFE_PATH}, None
    except SandboxError as exc:
        raise ToolError(f"the sandbox is not available: {exc}") from None
    stdin = _stdin_with(stdin_text) if stdin_text else None
    try:
        done = run_bounded(
            argv,
            cancel=ctx.cancel,
            max_bytes=max_bytes,
            timeout=timeout,
            progress=ctx.progress,
            stdin=stdin,
            env=env,
            cwd=cwd,
        )
    finally:
        if stdin is not None:
            stdin.close()
    if done.reason:
        raise ToolError(f"the process was killed ({done.reason})")
    output = done.output.decode("utf-8", "replace")
    if done.dropped:
        output += f"\n[output truncated: {done.dropped} more bytes were dropped]"
    return ToolResult(
        output if output.strip() else "(no output)",
        exit_code=done.exit_code or 0,
        meta={"exit_code": done.exit_code, "truncated": bool(done.dropped)},
    )


def _python(ctx: ToolContext) -> str:
    settings = SandboxSettings.from_config(ctx.config)
    return sys.executable if settings.unsandboxed else interpreter()


def run_python(args: dict, ctx: ToolContext) -> ToolResult:
    """Run the code with Python 3 (``python -I -``: isolated mode, the program on stdin)."""
    code = args.get("code")
    if not isinstance(code, str) or not code.strip():
        raise ToolError("code must be a non-empty string")
    return run_process([_python(ctx), "-I", "-u", "-"], ctx, stdin_text=code)


def shell(args: dict, ctx: ToolContext) -> ToolResult:
    """Run a command line with /bin/sh."""
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ToolError("command must be a non-empty string")
    return run_process(["/bin/sh", "-c", command], ctx)


def code_tools(config: dict, approval: bool = True) -> List[Tool]:
    """``run_python`` and ``shell``, with the configured time limit."""
    timeout = float(config.get("CODE_TIMEOUT", 30.0))
    return [
        Tool(
            "run_python",
            "Run a Python 3 program in a sandbox whose working directory is /workspace (this chat "
            "session's files, kept between calls) and return its output (stdout and stderr).",
            {
                "type": "object",
                "properties": {"code": {"type": "string", "description": "the program"}},
                "required": ["code"],
            },
            run_python,
            needs_approval=approval,
            timeout=timeout,
            describe=lambda a: str(a.get("code", "")),
        ),
        Tool(
            "shell",
            "Run a shell command (/bin/sh -c) in a sandbox whose working directory is /workspace "
            "(this chat session's files) and return its output.",
            {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
            shell,
            needs_approval=approval,
            timeout=timeout,
            describe=lambda a: str(a.get("command", "")),
        ),
    ]
