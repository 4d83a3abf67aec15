"""The program around a code tool's command inside the sandbox: fill /workspace, run, save back within quota.

The server never imports it to run it: ``sandbox.sandbox_argv`` starts it with the sandbox's own
interpreter as ``python -I -S -c <this source> PERSIST_FD STATUS_FD LIMIT_BYTES MAX_FILES TIMEOUT
WORKSPACE -- prlimit ... -- COMMAND``, with WORKSPACE (/workspace) an empty tmpfs and two
inherited descriptors: PERSIST_FD, the session's workspace directory on the host (there is no
path to it in the sandbox), and STATUS_FD, a pipe for the one-line JSON report the server reads.
It imports only built-in modules (no json, subprocess or signal: every call pays for this
interpreter's start). ``odysseus.tools.quota`` imports ``measure`` and ``charge`` from here, so
the host and the sandbox count alike.

Invariants:

- The command never holds ``persist_fd`` or ``status_fd`` (both close-on-exec) and cannot take
  them from us: we are non-dumpable, so a process of the same uid can neither ptrace us nor open
  ``/proc/<pid>/fd``. It can kill us; then nothing is saved and the server says so.
- Before anything is measured or saved, every other process of the sandbox is dead
  (``kill(-1, SIGKILL)`` in the sandbox's PID namespace, until none is left), so nothing
  changes /workspace between the check and the copy.
- A file counts its apparent size rounded up to a 4 KiB block (a sparse file its full size: its
  copy on the host is not sparse), every file, directory and symlink at least one block.
- Past ``limit_bytes``, ``max_files`` or ``MAX_DEPTH``, or with the tmpfs full (a write got
  ENOSPC), nothing is saved: the host directory stays as it was.
- Saving mirrors /workspace onto the host directory under ``flock(persist_fd)``: new and changed
  files copied (to a temporary name, then renamed), removed ones removed, symlinks re-created as
  symlinks (never followed, on either side), fifos, sockets and devices left out. A file copied
  in and untouched (same inode, ctime, size and mtime) is not copied again.
- At ``timeout`` seconds after the start the command and everything it started are killed, and
  what it wrote is saved within quota like any other call's; the server's own kill stays the
  backstop.
"""

import _signal  # type: ignore[import-not-found]  # signal itself imports enum: ~7 ms per call
import errno
import fcntl
import os
import select
import stat
import sys
import time

BLOCK = 4096
MAX_DEPTH = 128
#: exit code of a command stopped at the time limit (as timeout(1) uses)
TIMED_OUT = 124
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Full(Exception):
    """A quota is exceeded: ``kind`` is "bytes", "files", "depth" or "space"."""

    def __init__(self, kind):
        super().__init__(kind)
        self.kind = kind


class Tally:
    """Entries and bytes counted so far, against limits (None: no limit)."""

    def __init__(self, max_bytes=None, max_files=None):
        self.bytes = 0
        self.files = 0
        self.max_bytes = max_bytes
        self.max_files = max_files

    def add(self, st):
        """Count one entry; raise ``Full`` past a limit."""
        self.files += 1
        self.bytes += charge(st)
        if self.max_files is not None and self.files > self.max_files:
            raise Full("files")
        if self.max_bytes is not None and self.bytes > self.max_bytes:
            raise Full("bytes")


def charge(st):
    """What one entry counts against the quota (see the module docstring)."""
    if stat.S_ISREG(st.st_mode):
        size = max(st.st_size, st.st_blocks * 512)
        return max(BLOCK, -(-size // BLOCK) * BLOCK)
    return BLOCK


def kind(st):
    """ "dir", "link", "file" or "other" (fifos, sockets, devices: never saved)."""
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    if stat.S_ISLNK(st.st_mode):
        return "link"
    if stat.S_ISREG(st.st_mode):
        return "file"
    return "other"


def listing(dir_fd):
    """{name: lstat} of a directory given by descriptor, in name order; "other" entries left out."""
    out = {}
    for name in sorted(os.listdir(dir_fd)):
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if kind(st) != "other":
            out[name] = st
    return out


def open_dir(dir_fd, name):
    """A descriptor of the subdirectory ``name`` (never through a symlink), made readable, writable, searchable."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:  # lstat said directory, and only we change this tree now
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        os.chmod(name, (mode & 0o777) | 0o700, dir_fd=dir_fd)
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    mode = os.fstat(fd).st_mode
    if mode & 0o700 != 0o700:  # so that what is in it can be copied and removed
        os.fchmod(fd, (mode & 0o777) | 0o700)
    return fd


def measure(dir_fd, tally, depth=0):
    """Count everything under ``dir_fd`` into ``tally`` (raises ``Full`` past its limits or ``MAX_DEPTH``)."""
    if depth > MAX_DEPTH:
        raise Full("depth")
    for name, st in listing(dir_fd).items():
        tally.add(st)
        if stat.S_ISDIR(st.st_mode):
            sub = open_dir(dir_fd, name)
            try:
                measure(sub, tally, depth + 1)
            finally:
                os.close(sub)
    return tally


def copy_file(src_dir, name, dst_dir, target, st):
    """Copy the regular file ``name`` to ``target`` (created; mode and mtime kept, owner may read and write)."""
    try:
        src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=src_dir)
    except PermissionError:
        os.chmod(name, (st.st_mode & 0o777) | 0o600, dir_fd=src_dir)
        src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=src_dir)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        dst = os.open(target, flags, 0o600, dir_fd=dst_dir)
        try:
            offset = 0
            while True:
                sent = os.sendfile(dst, src, offset, 1 << 20)
                if not sent:
                    break
                offset += sent
            os.fchmod(dst, (st.st_mode & 0o777) | 0o600)
            os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(dst)
    finally:
        os.close(src)


def remove(dir_fd, name, st):
    """Remove ``name`` (a directory with everything in it), never following a symlink."""
    if stat.S_ISDIR(st.st_mode):
        sub = open_dir(dir_fd, name)
        try:
            for child, child_st in _all_entries(sub).items():
                remove(sub, child, child_st)
        finally:
            os.close(sub)
        os.rmdir(name, dir_fd=dir_fd)
    else:
        os.unlink(name, dir_fd=dir_fd)


def _all_entries(dir_fd):
    out = {}
    for name in os.listdir(dir_fd):
        try:
            out[name] = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
    return out


def load(src_dir, dst_dir, tally, seen, path=(), depth=0):
    """Copy the host tree into the tmpfs; ``seen[path] = (inode, ctime)`` of each copy, to spot changes later."""
    if depth > MAX_DEPTH:
        raise Full("depth")
    for name, st in listing(src_dir).items():
        tally.add(st)
        here = path + (name,)
        if stat.S_ISDIR(st.st_mode):
            os.mkdir(name, 0o700, dir_fd=dst_dir)
            src_sub, dst_sub = open_dir(src_dir, name), open_dir(dst_dir, name)
            try:
                load(src_sub, dst_sub, tally, seen, here, depth + 1)
            finally:
                os.close(src_sub)
                os.close(dst_sub)
            os.chmod(name, (st.st_mode & 0o777) | 0o700, dir_fd=dst_dir)
        elif stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(name, dir_fd=src_dir), name, dir_fd=dst_dir)
        else:
            copy_file(src_dir, name, dst_dir, name, st)
        copied = os.stat(name, dir_fd=dst_dir, follow_symlinks=False)
        seen[here] = (copied.st_ino, copied.st_ctime_ns)


def _unused_name(taken):
    for n in range(1000):
        name = f".odysseus-part-{os.getpid()}-{n}"
        if name not in taken:
            return name
    raise OSError(errno.EEXIST, "no free temporary name")


def mirror(src_dir, dst_dir, seen, path=()):
    """Make the host directory ``dst_dir`` hold exactly what the tmpfs directory ``src_dir`` holds."""
    src, found = listing(src_dir), _all_entries(dst_dir)
    dst = {}
    for name, st in found.items():
        if name in src and kind(st) == kind(src[name]):
            dst[name] = st
        else:
            remove(dst_dir, name, st)
    for name, st in src.items():
        here, old = path + (name,), dst.get(name)
        if stat.S_ISDIR(st.st_mode):
            if old is None:
                os.mkdir(name, 0o700, dir_fd=dst_dir)
            src_sub, dst_sub = open_dir(src_dir, name), open_dir(dst_dir, name)
            try:
                mirror(src_sub, dst_sub, seen, here)
            finally:
                os.close(src_sub)
                os.close(dst_sub)
            os.chmod(name, (st.st_mode & 0o777) | 0o700, dir_fd=dst_dir)
        elif stat.S_ISLNK(st.st_mode):
            target = os.readlink(name, dir_fd=src_dir)
            if old is not None and os.readlink(name, dir_fd=dst_dir) == target:
                continue
            if old is not None:
                os.unlink(name, dir_fd=dst_dir)
            os.symlink(target, name, dir_fd=dst_dir)
        else:
            untouched = seen.get(here) == (st.st_ino, st.st_ctime_ns)
            if old is not None and untouched and (old.st_size, old.st_mtime_ns) == (st.st_size, st.st_mtime_ns):
                continue
            part = _unused_name(set(src) | set(found))
            copy_file(src_dir, name, dst_dir, part, st)
            os.replace(part, name, src_dir_fd=dst_dir, dst_dir_fd=dst_dir)


def kill_the_rest():
    """SIGKILL every other process of this PID namespace (not init, not us) until none is left."""
    me, deadline = os.getpid(), time.monotonic() + 10
    if (me, os.getppid()) != (2, 1):  # bwrap's init is 1 and its child (we) 2: never kill(-1) on a host
        raise RuntimeError("not the first process of the sandbox's PID namespace")
    while True:
        try:
            os.kill(-1, _signal.SIGKILL)
        except ProcessLookupError:
            pass
        alive = []
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) not in (1, me):
                try:
                    with open(f"/proc/{name}/stat", "rb") as fh:
                        if fh.read().rsplit(b")", 1)[-1].split()[0] != b"Z":
                            alive.append(name)
                except OSError:
                    continue
        if not alive or time.monotonic() > deadline:
            return not alive
        time.sleep(0.01)  # SIGKILL is delivered as each process next runs


def run_command(argv, timeout):
    """Run the command with our stdin/stdout/stderr; (exit code, timed out)."""
    try:  # the default action for the signals Python ignores, as a shell would start it
        pid = os.posix_spawn(argv[0], argv, os.environ, setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ))
    except OSError as exc:
        os.write(2, f"cannot run {argv[0]}: {exc.strerror}\n".encode())
        return 127, False
    ended = os.pidfd_open(pid)
    try:
        poller = select.poll()
        poller.register(ended, select.POLLIN)
        deadline = time.monotonic() + timeout
        while not poller.poll(max(0, int((deadline - time.monotonic()) * 1000)) + 1):
            if time.monotonic() >= deadline:
                kill_the_rest()
                os.waitpid(pid, 0)
                return TIMED_OUT, True
    finally:
        os.close(ended)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return (128 - code if code < 0 else code), False


def tmpfs_full(path):
    """True when the tmpfs has no block left: some write of the command got ENOSPC."""
    return os.statvfs(path).f_bavail == 0


def not_dumpable():
    """prctl(PR_SET_DUMPABLE, 0): the command (same uid) can neither ptrace us nor open our /proc/<pid>/fd."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def fill(persist, work, settings, report):
    """Copy the host workspace into the tmpfs; False (with the reason in ``report``) when it does not fit."""
    seen = {}
    fcntl.flock(persist, fcntl.LOCK_SH)
    try:
        load(persist, work, Tally(max_files=settings["max_files"]), seen)
    except Full as full:
        report.update(full=full.kind, phase="load")
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        report.update(full="bytes", phase="load")
    finally:
        fcntl.flock(persist, fcntl.LOCK_UN)
    return None if report["full"] else seen


def save(persist, work, settings, seen, report):
    """Within quota, mirror the tmpfs onto the host workspace; else leave the host as it was."""
    try:
        if tmpfs_full(settings["workspace"]):
            raise Full("space")
        tally = measure(work, Tally(settings["limit_bytes"], settings["max_files"]))
    except Full as full:
        report.update(full=full.kind, phase="save")
        return
    report.update(bytes=tally.bytes, files=tally.files)
    fcntl.flock(persist, fcntl.LOCK_EX)
    try:
        mirror(work, persist, seen)
    finally:
        fcntl.flock(persist, fcntl.LOCK_UN)
    report["saved"] = True


def to_json(report):
    """``report`` (str, int, bool and None values) as one line of JSON, without the json module."""
    parts = []
    for key, value in report.items():
        if isinstance(value, str):
            text = "".join(
                c if c.isprintable() and c not in '"\\' else f"\\u{ord(c):04x}" if ord(c) < 0x10000 else "?"
                for c in value
            )
            parts.append(f'"{key}": "{text}"')
        elif isinstance(value, bool) or value is None:
            parts.append(f'"{key}": {"null" if value is None else str(value).lower()}')
        else:
            parts.append(f'"{key}": {int(value)}')
    return "{" + ", ".join(parts) + "}"


def main(argv):
    """Fill /workspace, run the command, check the quota, save; write the report; the command's exit code."""
    started = time.monotonic()
    persist, status, limit_bytes, max_files = (int(arg) for arg in argv[1:5])
    settings = {"limit_bytes": limit_bytes, "max_files": max_files, "workspace": argv[6]}
    timeout, command = float(argv[5]), argv[argv.index("--") + 1 :]
    os.set_inheritable(persist, False)
    os.set_inheritable(status, False)
    report = {"exit": None, "timed_out": False, "full": "", "phase": "", "saved": False, "bytes": 0, "files": 0}
    code = 1
    try:
        not_dumpable()
        work = os.open(settings["workspace"], _DIR_FLAGS)
        report["phase"] = "load"
        seen = fill(persist, work, settings, report)
        if seen is None:
            return code
        report["phase"] = "run"
        code, timed_out = run_command(command, timeout - (time.monotonic() - started))
        report.update(exit=code, timed_out=timed_out, phase="save")
        if not kill_the_rest():
            report["error"] = "a process of the sandbox did not end"
            return code
        save(persist, work, settings, seen, report)
        return code if (report["saved"] or code) else 1
    except Exception as exc:  # noqa: BLE001 - reported to the server, which tells the model
        report["error"] = f"{type(exc).__name__}: {exc}"[:300]
        return code or 1
    finally:
        os.write(status, (to_json(report) + "\n").encode())


if __name__ == "__main__":
    sys.exit(main(sys.argv))
