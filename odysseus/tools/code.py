"""Code tools: ``run_python`` and ``shell`` in a subprocess.

Each call runs in the session's working directory, in its own process group, with an
environment that carries nothing of ours (only PATH, HOME=the workdir, LANG), a time
limit and an output cap. Output lines are reported through ``ctx.progress`` as they
arrive. Cancel (the run stopping, or the tool timing out) kills the whole group, so
no child outlives its call.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import List

from .registry import Tool, ToolContext, ToolError, ToolResult

SNIPPET = "_odysseus_snippet.py"


def safe_env(workdir: str) -> dict:
    """The subprocess environment: no inherited secrets, HOME in the workdir."""
    return {"PATH": os.environ.get("PATH") or "/usr/local/bin:/usr/bin:/bin", "HOME": workdir,
            "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def run_process(argv: List[str], ctx: ToolContext) -> ToolResult:
    """Run ``argv`` in the session workdir; stream lines to progress; cap the kept output."""
    workdir = ctx.workspace()
    cap = int(ctx.config.get("CODE_OUTPUT_CAP", 20_000))
    ctx.cancel.raise_if_cancelled()
    proc = subprocess.Popen(argv, cwd=workdir, env=safe_env(workdir), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    unregister = ctx.cancel.on_cancel(lambda: _kill_group(proc))
    kept: List[str] = []
    size, dropped = 0, 0
    try:
        assert proc.stdout is not None
        for raw in iter(proc.stdout.readline, b""):
            line = raw.decode("utf-8", "replace")
            if size < cap:
                kept.append(line[:cap - size])
                dropped += max(0, len(line) - (cap - size))
                size += len(line)
            else:
                dropped += len(line)
            ctx.progress(line.rstrip("\n"))
        code = proc.wait()
    finally:
        unregister()
        if proc.poll() is None:
            _kill_group(proc)
            proc.wait()
        _kill_group(proc)  # background children left in the group
        if proc.stdout is not None:
            proc.stdout.close()
    output = "".join(kept)
    if dropped:
        output += f"\n[output truncated: {dropped} more characters]"
    if ctx.cancel.cancelled:
        raise ToolError(f"the process was killed ({ctx.cancel.reason})")
    return ToolResult(output if output.strip() else "(no output)", exit_code=code,
                      meta={"exit_code": code, "truncated": bool(dropped)})


def run_python(args: dict, ctx: ToolContext) -> ToolResult:
    """Write the code into the workdir and run it with this server's Python."""
    code = args.get("code")
    if not isinstance(code, str) or not code.strip():
        raise ToolError("code must be a non-empty string")
    path = os.path.join(ctx.workspace(), SNIPPET)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(code)
    # -E: ignore PYTHON* variables; -s: no user site-packages.
    return run_process([sys.executable, "-E", "-s", "-u", SNIPPET], ctx)


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
        Tool("run_python", "Run a Python 3 program in the session's working directory and return its output "
             "(stdout and stderr). Files written there persist for this chat session.",
             {"type": "object", "properties": {"code": {"type": "string", "description": "the program"}},
              "required": ["code"]},
             run_python, needs_approval=approval, timeout=timeout, describe=lambda a: str(a.get("code", ""))),
        Tool("shell", "Run a shell command (/bin/sh -c) in the session's working directory and return its output.",
             {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
             shell, needs_approval=approval, timeout=timeout, describe=lambda a: str(a.get("command", ""))),
    ]
