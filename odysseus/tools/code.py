"""Code tools: ``run_python`` and ``shell``, each call in a fresh bubblewrap sandbox.

The sandbox (``sandbox.py``) sees only ``/usr``, the interpreter, a private ``/tmp`` and
``/workspace`` (its cwd and HOME): for a session, a tmpfs holding a copy of the session's
workspace that is saved back when the call ends, within the disk quota (``quota.py``; past it
the call fails with "workspace full" and nothing is saved); for an admin's chosen directory
(``odysseus.context.workspace``), that directory itself. New user, PID, IPC and network
namespaces and resource limits. The program reaches the sandbox on stdin (``python -``), so the
server never writes a file into a directory the sandboxed code controls. Output is read in
bytes with a cap (``process.py``). The command gets ``CODE_TIMEOUT`` seconds (then the sandbox
stops it and still saves its files), the call ``SAVE_GRACE`` more; a stop kills the whole
sandbox at once, and then nothing of the call is saved.

``CODE_TOOLS_UNSANDBOXED`` (single-user mode only) runs the same commands directly in the
workspace with a stripped environment and no quota; it exists for hosts where bubblewrap
cannot work.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import List, Optional

from .process import run_bounded
from .quota import QuotaPlan, WorkspaceQuota, full_message, plan, saved
from .registry import Tool, ToolContext, ToolError, ToolResult
from .sandbox import (
    SAFE_PATH,
    SandboxError,
    SandboxSettings,
    TmpfsWorkspace,
    for_chosen_directory,
    interpreter,
    prepare_workspace,
    read_report,
    sandbox_argv,
)

#: the tools this module provides (removed from the offer when the sandbox is unusable)
CODE_TOOL_NAMES = ("run_python", "shell")
DEFAULT_OUTPUT_MAX_BYTES = 1024 * 1024
#: seconds a call may take past ``CODE_TIMEOUT``: bubblewrap's start, loading and saving the workspace
SAVE_GRACE = 30.0


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
    """Run ``command`` for this session (sandboxed unless configured otherwise); cap the kept output.

    A session workspace is a tmpfs within quota (``quota.py``, ``workspace_child.py``); an admin's
    chosen directory is bound as it is and has no quota, and neither has the unsandboxed mode.
    """
    settings = SandboxSettings.from_config(ctx.config)
    workdir = ctx.workspace()
    max_bytes = int(ctx.config.get("TOOL_OUTPUT_MAX_BYTES", DEFAULT_OUTPUT_MAX_BYTES))
    code_timeout = float(ctx.config.get("CODE_TIMEOUT", 30.0))
    timeout = code_timeout  # the host's kill; with a quota the sandbox stops the command itself first
    quota = WorkspaceQuota.from_config(ctx.config)
    limits: Optional[QuotaPlan] = None
    fds: List[int] = []
    status = -1
    try:
        if ctx.workspace_dir:  # an admin's chosen host directory: bound as it is, never re-owned
            settings = for_chosen_directory(workdir, settings)
        else:
            prepare_workspace(workdir, settings)
        if settings.unsandboxed:
            argv, env, cwd = command, safe_env(workdir), workdir
        elif ctx.workspace_dir:
            argv, env, cwd = sandbox_argv(settings, workdir, command, network=ctx.network), {"PATH": SAFE_PATH}, None
        else:
            limits = plan(quota, workdir)
            fds.append(os.open(workdir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC))
            status, status_write = os.pipe()
            fds.append(status_write)
            tmpfs = TmpfsWorkspace(
                fds[0], status_write, limits.mount_bytes, limits.limit_bytes, quota.max_files, code_timeout
            )
            argv = sandbox_argv(settings, workdir, command, network=ctx.network, tmpfs=tmpfs)
            env, cwd, timeout = {"PATH": SAFE_PATH}, None, code_timeout + SAVE_GRACE - 1
    except BaseException as exc:
        for fd in fds + ([status] if status >= 0 else []):
            os.close(fd)
        if isinstance(exc, SandboxError):
            raise ToolError(f"the sandbox is not available: {exc}") from None
        raise
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
            pass_fds=fds,
        )
    finally:
        if stdin is not None:
            stdin.close()
        report = read_report(status) if status >= 0 else None
    if done.reason and done.reason != "timeout":
        raise ToolError(f"the process was killed ({done.reason})")
    output = done.output.decode("utf-8", "replace")
    if done.dropped:
        output += f"\n[output truncated: {done.dropped} more bytes were dropped]"
    meta: dict = {"exit_code": done.exit_code, "truncated": bool(done.dropped)}
    if done.reason == "timeout":
        meta["timeout"] = code_timeout
        return _failed(output, 124, meta, f"timed out after {code_timeout:g} s: the process was stopped")
    if limits is not None:
        return _with_report(output, done.exit_code, meta, report, quota, limits, workdir, code_timeout)
    return ToolResult(output if output.strip() else "(no output)", exit_code=done.exit_code or 0, meta=meta)


def _failed(output: str, exit_code: int, meta: dict, error: str) -> ToolResult:
    """A result the model reads as an error: the output, then ``Error: ...``; a non-zero exit code."""
    text = (output.rstrip("\n") + "\n" if output.strip() else "") + f"Error: {error}"
    return ToolResult(text, exit_code=exit_code or 1, meta={**meta, "error": error})


def _with_report(
    output: str,
    exit_code: Optional[int],
    meta: dict,
    report: Optional[dict],
    quota: WorkspaceQuota,
    limits: QuotaPlan,
    workdir: str,
    code_timeout: float,
) -> ToolResult:
    """The result of a call with a quota, from the workspace child's report: saved, full, or timed out."""
    if report is None:  # the command killed the child, or it could not start
        return _failed(output, exit_code or 1, meta, "the sandbox ended before /workspace was saved; nothing was kept")
    if report.get("exit") is not None:
        exit_code = int(report["exit"])
    meta["exit_code"] = exit_code
    timed_out = f"timed out after {code_timeout:g} s: the process was stopped"
    if report.get("timed_out"):
        meta["timeout"] = code_timeout
    if report.get("full"):
        meta["workspace_full"] = True
        error = full_message(report, quota, limits)
        return _failed(output, exit_code or 1, meta, f"{timed_out}; {error}" if report.get("timed_out") else error)
    if report.get("error") or not report.get("saved"):
        error = f"/workspace was not saved: {report.get('error') or 'unknown reason'}"
        return _failed(output, exit_code or 1, meta, error)
    saved(workdir, quota, int(report.get("bytes") or 0))
    if report.get("timed_out"):
        return _failed(output, exit_code or 124, meta, f"{timed_out}; what it wrote to /workspace was kept")
    return ToolResult(output if output.strip() else "(no output)", exit_code=exit_code or 0, meta=meta)


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
    """``run_python`` and ``shell``: the command gets ``CODE_TIMEOUT``, the call that plus saving its files."""
    timeout = float(config.get("CODE_TIMEOUT", 30.0)) + SAVE_GRACE
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
