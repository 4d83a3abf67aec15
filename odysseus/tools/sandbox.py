"""The code sandbox: bubblewrap command lines, resource limits, workspaces and the start-up probe.

Every ``run_python`` / ``shell`` call in a session workspace runs as::

    bwrap --unshare-user --unshare-pid --unshare-ipc [--unshare-net] --disable-userns
          --uid U --gid G --die-with-parent --new-session
          --size N --tmpfs /tmp   (first: a bind below /tmp, a virtualenv there, stays visible)
          --ro-bind /usr /usr  (+ /bin /lib /lib64 ... as symlinks or read-only binds, as the host has them)
          --ro-bind PYTHON_PREFIX PYTHON_PREFIX   (only when the interpreter lives outside /usr)
          --proc /proc --dev /dev
          --size LIMIT --tmpfs /workspace --chdir /workspace --clearenv --setenv ...
          -- python -I -S -c WORKSPACE_CHILD SETTINGS
          -- prlimit --cpu --as --nproc --fsize --nofile --core=0 -- COMMAND

Nothing else of the host is visible: no /etc (so no /etc/shadow), no data directory, no
workspace directory of the host (not even this session's), no /home, and a /proc of the
sandbox's own PID namespace only.

The session's workspace on the host reaches the sandbox only as an inherited directory
descriptor held by the workspace child (``workspace_child.py``, run with the sandbox's own
interpreter): it copies the files into the tmpfs, runs the command (killing it at
``CODE_TIMEOUT``), kills everything left, and saves the tmpfs back only within the quota
(``quota.py``: ``WORKSPACE_MAX_BYTES``, ``WORKSPACE_MAX_FILES``, ``WORKSPACE_USER_MAX_BYTES``).
The tmpfs is the real limit while the command runs (a write past it gets ENOSPC), so the data
disk never holds more than the quota; the workspace lives in memory during a call.

An admin's chosen directory (``for_chosen_directory``) is bound read-write at /workspace as it
is, with no quota and no workspace child; so is every workspace with ``CODE_TOOLS_UNSANDBOXED``.

When the server runs as root, that command runs inside an *outer* bwrap (as root, no user
namespace) that binds only the same directories and switches to ``SANDBOX_UID`` with
``setpriv``. Two reasons: the kernel exempts uid 0 from ``RLIMIT_NPROC`` (a user namespace
does not change the kernel uid), and bwrap started as an unprivileged uid cannot resolve a
workspace below a 0700 data directory (the descriptor is opened by the server). Killing the
outermost process kills everything: each bwrap dies with its parent and a PID namespace dies
with its first process.

``probe`` runs the real command line once at start-up (fail closed: when it does not work the
code tools are not offered, and the reason is reported). No Flask here.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from ..errors import OdysseusError

#: where the session workspace appears inside the sandbox (and its cwd and HOME)
WORKSPACE = "/workspace"
#: host top-level entries that are bound (read-only) or re-created as symlinks when present
SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
#: files a sandbox with network access needs to resolve names and check certificates
NETWORK_ETC = (
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
)
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


class SandboxError(Exception):
    """The sandbox cannot be set up (the reason is shown to the admin and the model)."""


@dataclass(frozen=True)
class TmpfsWorkspace:
    """/workspace as a tmpfs of ``mount_bytes``, filled from and saved back to a host directory (quota.py).

    ``persist_fd`` (that directory) and ``status_fd`` (the report pipe's write end) must reach the
    sandbox: pass them to the process (``pass_fds``). ``workspace_child.py`` runs around the command.
    """

    persist_fd: int
    status_fd: int
    mount_bytes: int
    limit_bytes: int
    max_files: int
    #: seconds the command may run; then it is killed and the workspace saved within quota
    timeout: float


@functools.lru_cache(maxsize=1)
def _child_source() -> str:
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "workspace_child.py"), encoding="utf-8") as fh:
        return fh.read()


def _around(tmpfs: TmpfsWorkspace) -> List[str]:
    """The workspace child's command line (the sandbox's own interpreter), to which ``--`` COMMAND is added."""
    numbers = (tmpfs.persist_fd, tmpfs.status_fd, tmpfs.limit_bytes, tmpfs.max_files, tmpfs.timeout)
    return [interpreter(), "-I", "-S", "-c", _child_source(), *(str(n) for n in numbers), WORKSPACE, "--"]


@dataclass
class SandboxSettings:
    """The sandbox's configuration, from flat config keys (see ``odysseus.config.DEFAULTS``)."""

    bwrap: str = "bwrap"
    uid: int = 65534
    gid: int = 65534
    cpu_seconds: int = 60
    memory_bytes: int = 1024**3
    max_processes: int = 64
    max_file_bytes: int = 64 * 1024**2
    max_open_files: int = 256
    tmp_bytes: int = 64 * 1024**2
    unsandboxed: bool = False
    data_dir: str = ""
    #: as root, skip the wrapper that switches to ``uid`` (the kernel uid stays 0: see ``for_chosen_directory``)
    direct: bool = False

    @classmethod
    def from_config(cls, config: dict) -> "SandboxSettings":
        """Settings from the app config; missing keys take the defaults above."""
        return cls(
            bwrap=str(config.get("SANDBOX_BWRAP") or "bwrap"),
            uid=int(config.get("SANDBOX_UID", 65534)),
            gid=int(config.get("SANDBOX_GID", 65534)),
            cpu_seconds=int(config.get("SANDBOX_CPU_SECONDS", 60)),
            memory_bytes=int(config.get("SANDBOX_MEMORY_BYTES", 1024**3)),
            max_processes=int(config.get("SANDBOX_MAX_PROCESSES", 64)),
            max_file_bytes=int(config.get("SANDBOX_MAX_FILE_BYTES", 64 * 1024**2)),
            max_open_files=int(config.get("SANDBOX_MAX_OPEN_FILES", 256)),
            tmp_bytes=int(config.get("SANDBOX_TMP_BYTES", 64 * 1024**2)),
            unsandboxed=bool(config.get("CODE_TOOLS_UNSANDBOXED", False)),
            data_dir=str(config.get("DATA_DIR") or ""),
        )


def as_root() -> bool:
    """True when this server runs as root (then the sandbox switches to ``SANDBOX_UID``)."""
    return os.geteuid() == 0


def _which(name: str) -> Optional[str]:
    if os.sep in name:
        return name if os.access(name, os.X_OK) else None
    return shutil.which(name, path=SAFE_PATH)


def python_prefix() -> str:
    """The interpreter's installation prefix (``sys.base_prefix``: never the server's venv)."""
    return os.path.realpath(sys.base_prefix)


def interpreter() -> str:
    """The Python executable the sandbox runs: the base interpreter behind this server's (venv) Python."""
    prefix = python_prefix()
    for candidate in (getattr(sys, "_base_executable", "") or "", sys.executable):
        real = os.path.realpath(candidate) if candidate else ""
        if real and (real.startswith(prefix + os.sep) or real.startswith("/usr/")) and os.access(real, os.X_OK):
            return real
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for name in (version, "python3"):
        path = os.path.join(prefix, "bin", name)
        if os.access(path, os.X_OK):
            return os.path.realpath(path)
    raise SandboxError(f"no Python interpreter found under {prefix}")


def _under(path: str, root: str) -> bool:
    path, root = os.path.realpath(path), os.path.realpath(root)
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _system_binds() -> List[str]:
    """/usr read-only, and /bin, /lib, ... as the host has them (symlinks into /usr, or directories)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in SYSTEM_DIRS:
        path = "/" + name
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def _ancestors(path: str) -> List[str]:
    parts, out = path.strip("/").split("/")[:-1], []
    for i in range(1, len(parts) + 1):
        out.append("/" + "/".join(parts[:i]))
    return out


def _read_only_binds(network: bool, nested: bool = False, extra: Sequence[str] = ()) -> List[str]:
    """System directories, the interpreter prefix, ``extra`` directories (an MCP server's installation)
    and (with network) the resolver and CA files, read-only.

    ``nested``: for the inner bwrap under the root wrapper, whose sources are the wrapper's targets.
    """
    args = _system_binds()
    binds = []
    prefix = python_prefix()
    if not _under(prefix, "/usr"):
        binds.append((prefix, prefix))
    for path in extra:
        if not _under(path, "/usr") and not _under(path, prefix):
            binds.append((path, path))
    if network:
        binds += [(os.path.realpath(path), path) for path in NETWORK_ETC if os.path.exists(path)]
    made = set()
    for source, target in binds:
        for parent in _ancestors(target):
            if parent not in made and not _under(parent, "/usr"):
                made.add(parent)
                args += ["--perms", "0755", "--dir", parent]  # bwrap would create them 0700
        args += ["--ro-bind", target if nested else source, target]
    return args


def check_layout(settings: SandboxSettings) -> None:
    """Refuse a layout where a read-only bind would expose the data directory, a home or the server's venv."""
    prefix = python_prefix()
    home = os.path.realpath(os.path.expanduser("~"))
    if prefix == "/" or (home != "/" and prefix == home):
        raise SandboxError(f"the Python prefix {prefix} is too broad to bind into the sandbox")
    if sys.prefix != sys.base_prefix and _under(sys.prefix, prefix) and not _under(prefix, "/usr"):
        raise SandboxError(f"the server's virtualenv {sys.prefix} is inside the Python prefix {prefix}")
    exposed = ["/usr", prefix] + [
        p for p in ("/" + n for n in SYSTEM_DIRS) if os.path.isdir(p) and not os.path.islink(p)
    ]
    for root in exposed:
        if settings.data_dir and _under(settings.data_dir, root):
            raise SandboxError(f"DATA_DIR is inside {root}, which the sandbox binds read-only; move it")


def sandbox_argv(
    settings: SandboxSettings,
    workspace: str,
    command: List[str],
    *,
    network: bool = False,
    tmpfs: Optional[TmpfsWorkspace] = None,
    extra_ro: Sequence[str] = (),
    env: Optional[Dict[str, str]] = None,
    limits: Optional[Sequence[str]] = None,
) -> List[str]:
    """The full command line running ``command`` in the sandbox with ``workspace`` at /workspace.

    With ``tmpfs`` the host directory is not mounted at all: /workspace is a size-limited tmpfs
    and the workspace child copies in and saves back through ``tmpfs.persist_fd``.
    ``extra_ro``: more directories bound read-only at their own path; ``env``: variables set over the
    sandbox's own (``PATH`` too); ``limits``: ``prlimit`` options instead of the ``SANDBOX_*`` ones
    (a long-lived MCP server gets no CPU-time or address-space limit)."""
    bwrap = _which(settings.bwrap)
    if bwrap is None:
        raise SandboxError(f"bubblewrap not found: {settings.bwrap!r} (install the bubblewrap package)")
    prlimit = _which("prlimit")
    if prlimit is None:
        raise SandboxError("prlimit (util-linux) not found")
    check_layout(settings)
    outer = as_root() and not settings.direct
    uid, gid = (settings.uid, settings.gid) if as_root() else (os.getuid(), os.getgid())
    if limits is None:
        limits = [
            f"--cpu={settings.cpu_seconds}",
            f"--as={settings.memory_bytes}",
            f"--nproc={settings.max_processes}",
            f"--fsize={settings.max_file_bytes}",
            f"--nofile={settings.max_open_files}",
            "--core=0",
        ]
    prlimits = [prlimit, *limits, "--"]
    path = SAFE_PATH
    prefix = python_prefix()
    if not _under(prefix, "/usr"):
        path = os.path.join(prefix, "bin") + ":" + path
    variables = {
        "PATH": path,
        "HOME": WORKSPACE,
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        **(env or {}),
    }
    inner = [bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--disable-userns"]
    if not network:
        inner.append("--unshare-net")
    inner += ["--hostname", "sandbox", "--uid", str(uid), "--gid", str(gid), "--die-with-parent", "--new-session"]
    # /tmp first: a read-only bind below it (a checkout or virtualenv under /tmp) must not be hidden by it
    inner += ["--size", str(settings.tmp_bytes), "--tmpfs", "/tmp"]
    inner += _read_only_binds(network, nested=outer, extra=extra_ro)
    inner += ["--proc", "/proc", "--dev", "/dev"]
    if tmpfs is not None:
        inner += ["--size", str(tmpfs.mount_bytes), "--tmpfs", WORKSPACE]
    else:
        inner += ["--bind", WORKSPACE if outer else workspace, WORKSPACE]
    inner += ["--chdir", WORKSPACE, "--clearenv"]
    for key, value in variables.items():
        inner += ["--setenv", key, value]
    inner += ["--"] + (_around(tmpfs) if tmpfs is not None else []) + prlimits + list(command)
    if not outer:
        return inner
    setpriv = _which("setpriv")
    if setpriv is None:
        raise SandboxError("setpriv (util-linux) not found; it is needed when the server runs as root")
    wrapper = [bwrap, "--unshare-pid", "--unshare-ipc"]
    if not network:
        wrapper.append("--unshare-net")
    # Only our own setpriv and the inner bwrap run here. The inner bwrap needs a fully visible
    # /proc to mount its own (bwrap's --proc covers parts of it), and a /tmp for its new root.
    wrapper += ["--die-with-parent", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    wrapper += ["--tmpfs", "/tmp"]  # first, as in the inner one
    wrapper += _read_only_binds(network, extra=extra_ro)
    wrapper += ["--bind", "/proc", "/proc", "--dev", "/dev"]
    if tmpfs is None:
        wrapper += ["--bind", workspace, WORKSPACE]
    wrapper += [
        "--",
        setpriv,
        f"--reuid={uid}",
        f"--regid={gid}",
        "--clear-groups",
        "--",
    ]
    return wrapper + inner


def prepare_workspace(path: str, settings: SandboxSettings) -> None:
    """Mode 0700, owned by the uid the sandbox runs as (``SANDBOX_UID`` when we are root)."""
    os.chmod(path, 0o700)
    if as_root() and not settings.unsandboxed:
        st = os.lstat(path)
        if (st.st_uid, st.st_gid) != (settings.uid, settings.gid):
            os.chown(path, settings.uid, settings.gid, follow_symlinks=False)


def for_chosen_directory(path: str, settings: SandboxSettings) -> SandboxSettings:
    """Settings for a host directory an admin chose as the workspace: left as it is (no chmod/chown).

    As root the sandbox runs as the directory's owner, so it can write there as before. For a
    root-owned directory that means the kernel uid stays 0 (bwrap maps it, the sandbox still has
    its own namespaces and no capabilities), and then the kernel does not enforce
    ``SANDBOX_MAX_PROCESSES``: only an admin can choose such a directory.

    Such a directory has no disk quota: it is bound read-write at /workspace (no tmpfs, no copy),
    because it is the admin's own directory, often larger than any workspace limit, and the point
    of choosing it is that the code changes it in place.
    """
    if not as_root():
        return settings
    st = os.stat(path)
    if st.st_uid == 0:
        return dataclasses.replace(settings, direct=True)
    return dataclasses.replace(settings, uid=st.st_uid, gid=st.st_gid)


@dataclass
class SandboxStatus:
    """Whether the code tools can be offered, and why not."""

    available: bool
    mode: str  # "bubblewrap", "unsandboxed", "off" (unusable) or "disabled" (not in AGENT_TOOLS)
    reason: str = ""

    def to_dict(self) -> dict:
        """The JSON shape of ``/api/health``'s ``code_tools``."""
        return {"available": self.available, "sandbox": self.mode, "reason": self.reason or None}


def read_report(fd: int) -> Optional[dict]:
    """The workspace child's one-line JSON report from the pipe ``fd`` (None when there is none); closes ``fd``."""
    data = b""
    try:
        os.set_blocking(fd, False)
        while len(data) < 65536:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    try:
        report = json.loads(data.decode("utf-8").splitlines()[0])
    except (ValueError, IndexError):
        return None
    return report if isinstance(report, dict) else None


def probe(settings: SandboxSettings, timeout: float = 20.0) -> SandboxStatus:
    """Run the real sandbox once (a tmpfs workspace, ``python -c`` writing a file) to see that it works here."""
    if settings.unsandboxed:
        return SandboxStatus(True, "unsandboxed", "CODE_TOOLS_UNSANDBOXED is set: code runs without a sandbox")
    scratch = tempfile.mkdtemp(prefix="odysseus-probe-")
    status = -1
    try:
        prepare_workspace(scratch, settings)
        persist = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        status, status_write = os.pipe()
        fds = (persist, status_write)
        try:
            tmpfs = TmpfsWorkspace(persist, status_write, 1024 * 1024, 1024 * 1024, 10, timeout)
            code = "open('probe', 'w').write('ok'); print('sandbox-ok')"
            argv = sandbox_argv(settings, scratch, [interpreter(), "-I", "-S", "-c", code], tmpfs=tmpfs)
            done = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout + 10,
                env={"PATH": SAFE_PATH},
                start_new_session=True,
                pass_fds=fds,
            )
        finally:
            for fd in fds:
                os.close(fd)
        report = read_report(status)
        status = -1
        kept = os.path.isfile(os.path.join(scratch, "probe"))
    except SandboxError as exc:
        return SandboxStatus(False, "off", str(exc))
    except (OSError, subprocess.SubprocessError) as exc:
        return SandboxStatus(False, "off", f"bubblewrap could not be run: {exc}"[:300])
    finally:
        if status >= 0:
            os.close(status)
        shutil.rmtree(scratch, ignore_errors=True)
    if done.returncode != 0 or done.stdout.strip() != b"sandbox-ok":
        detail = (done.stderr or done.stdout).decode("utf-8", "replace").strip().splitlines()
        return SandboxStatus(
            False,
            "off",
            "bubblewrap cannot create its namespaces here: "
            + (detail[-1][:200] if detail else f"exit {done.returncode}"),
        )
    if not (report and report.get("saved") and kept):
        why = (report or {}).get("error") or "no report from the workspace child"
        return SandboxStatus(False, "off", f"the sandbox's workspace could not be saved: {why}"[:300])
    return SandboxStatus(True, "bubblewrap")


def startup_status(config: dict) -> SandboxStatus:
    """At start-up: refuse ``CODE_TOOLS_UNSANDBOXED`` in password mode, else probe the sandbox once."""
    settings = SandboxSettings.from_config(config)
    raw = config.get("AGENT_TOOLS")
    names = raw if isinstance(raw, (list, tuple)) else str(raw or "").split(",")
    enabled = {str(n).strip() for n in names} & {"run_python", "shell"}
    if settings.unsandboxed and config.get("AUTH") != "none":
        raise OdysseusError(
            "CODE_TOOLS_UNSANDBOXED=1 is only allowed in single-user mode (AUTH=none): with "
            "accounts, code must run in the bubblewrap sandbox. Unset it, or install bubblewrap."
        )
    if not enabled:
        return SandboxStatus(False, "disabled", "run_python and shell are not in AGENT_TOOLS")
    try:
        check_layout(settings)  # depends on DATA_DIR: checked for every app
    except SandboxError as exc:
        return SandboxStatus(False, "off", str(exc))
    # The probe itself (a real sandbox run, ~0.1 s) does not depend on DATA_DIR: one per process
    # and set of settings, so every app an embedding process (or a test run) creates does not repeat it.
    key = (dataclasses.astuple(dataclasses.replace(settings, data_dir="")), _which(settings.bwrap))
    status = _PROBED.get(key)
    if status is None:
        status = _PROBED[key] = probe(settings)
    return status


#: startup_status's probe results in this process, by settings (without DATA_DIR) and bwrap path
_PROBED: Dict[tuple, SandboxStatus] = {}
