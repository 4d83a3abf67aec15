"""The ``odysseus`` command: ``serve`` (gunicorn + gevent), ``init-db``, ``create-user``, ``reset-password``,
``doctor``, ``config-table`` (docs/guide.md's configuration tables, from ``odysseus.config_keys``)."""

from __future__ import annotations

import argparse
import getpass
import os
import sys


def _project_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def serve(args: argparse.Namespace) -> int:
    """Run gunicorn with the gevent worker and our gunicorn.conf.py."""
    if args.port:
        os.environ["PORT"] = str(args.port)
    if args.host:
        os.environ["HOST"] = args.host
    from .bind import single_user_refusal
    from .config import load_config

    # gunicorn's master (execed below) warns about unknown keys: this read stays quiet so they are said once
    refusal = single_user_refusal(load_config(warn=False), [os.environ.get("HOST", "127.0.0.1")])
    if refusal:
        print(refusal, file=sys.stderr)
        return 2
    root = _project_root()
    conf = os.path.join(root, "gunicorn.conf.py")
    os.chdir(root)
    argv = [sys.executable, "-m", "gunicorn", "-c", conf, "wsgi:app"]
    os.execv(sys.executable, argv)
    return 0  # not reached


def init_db(args: argparse.Namespace) -> int:
    """Create the database and apply migrations."""
    from .config import load_config
    from .store import Store, database_path

    path = database_path(load_config())
    Store(path)
    print(f"database ready: {path}")
    return 0


def _accounts():
    from .accounts import Accounts
    from .config import load_config
    from .store import Store, database_path

    config = load_config()
    return Accounts(Store(database_path(config)), config)


def _read_password(args: argparse.Namespace) -> str:
    """The password from stdin (``--password-stdin``) or typed twice at a prompt."""
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass("Password: ")
    if first != getpass.getpass("Repeat password: "):
        raise SystemExit("the passwords differ")
    return first


def create_user(args: argparse.Namespace) -> int:
    """Create an account from the command line (the first one is always an admin)."""
    from .errors import OdysseusError

    accounts = _accounts()
    first = accounts.setup_needed()
    try:
        user = accounts.create_user(args.username, _read_password(args), is_admin=args.admin)
    except OdysseusError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    kind = "admin" if user["is_admin"] else "user"
    print(f"created {kind} {user['username']}" + (" (the first account is always an admin)" if first else ""))
    return 0


def reset_password(args: argparse.Namespace) -> int:
    """Set a user's password without the old one; signs that user out everywhere."""
    from .errors import OdysseusError

    try:
        user = _accounts().reset_password(args.username, _read_password(args))
    except OdysseusError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    print(f"password changed for {user['username']}")
    return 0


def doctor(args: argparse.Namespace) -> int:
    """Check a running server's streaming end to end: 0 when frames arrive as sent, 1 when bunched, 2 unreachable."""
    import time

    import requests

    from . import diagnostics

    base = args.url.rstrip("/")
    headers = {"Accept": "text/event-stream"}
    if args.token:
        headers["Authorization"] = f"Bearer {args.token}"
    count, interval = diagnostics.DEFAULT_COUNT, diagnostics.DEFAULT_INTERVAL
    url = f"{base}/api/diagnostics/stream?count={count}&interval_ms={round(interval * 1000)}"
    arrivals = []
    try:
        with requests.get(url, headers=headers, stream=True, timeout=(10, 30)) as response:
            if response.status_code != 200:
                print(f"error: {url} answered HTTP {response.status_code}", file=sys.stderr)
                return 2
            encoding = response.headers.get("Content-Encoding")
            for line in response.iter_lines(chunk_size=1, decode_unicode=True):
                if line and line.startswith("data: {"):
                    arrivals.append(time.monotonic())
    except requests.RequestException as exc:
        print(f"error: cannot reach {base}: {exc}", file=sys.stderr)
        return 2
    result = diagnostics.assess(arrivals, interval, count)
    print(f"streaming: {result['verdict']}: {result['message']}")
    if encoding:
        print(
            f"note: the event stream arrived compressed (Content-Encoding: {encoding}); "
            "compression buffers it - turn gzip off for text/event-stream"
        )
    return 0 if result["verdict"] == "ok" else (1 if result["verdict"] == "buffered" else 2)


def config_table(args: argparse.Namespace) -> int:
    """Print the markdown table of one guide section's keys (or every section's, each under its name)."""
    from .config_keys import config_table as table, section_names

    if args.doc:  # refill a document's marker blocks in place (docs/guide.md)
        from .config_keys import render_blocks

        with open(args.doc, encoding="utf-8") as fh:
            text = fh.read()
        with open(args.doc, "w", encoding="utf-8") as fh:
            fh.write(render_blocks(text))
        return 0
    sections = [args.section] if args.section else section_names()
    for section in sections:
        if section not in section_names():
            print(f"unknown section {section!r}; one of {', '.join(section_names())}", file=sys.stderr)
            return 2
        if not args.section:
            print(f"<!-- config-table: {section} -->")
        sys.stdout.write(table(section))
        if not args.section:
            print("<!-- /config-table -->\n")
    return 0


def main(argv=None) -> int:
    """Entry point of the console script."""
    parser = argparse.ArgumentParser(prog="odysseus", description="Self-hosted LLM chat")
    sub = parser.add_subparsers(dest="command", required=True)
    p_serve = sub.add_parser("serve", help="serve the app with gunicorn (gevent worker)")
    p_serve.add_argument("--host", default=None)
    p_serve.add_argument("--port", type=int, default=None)
    p_serve.set_defaults(func=serve)
    p_init = sub.add_parser("init-db", help="create the database and apply migrations")
    p_init.set_defaults(func=init_db)
    p_user = sub.add_parser("create-user", help="create an account (the first one becomes the admin)")
    p_user.add_argument("username")
    p_user.add_argument("--admin", action="store_true", help="make the account an admin")
    p_user.add_argument("--password-stdin", action="store_true", help="read the password from one line of stdin")
    p_user.set_defaults(func=create_user)
    p_reset = sub.add_parser("reset-password", help="set a user's password (signs them out everywhere)")
    p_reset.add_argument("username")
    p_reset.add_argument("--password-stdin", action="store_true", help="read the password from one line of stdin")
    p_reset.set_defaults(func=reset_password)
    p_doctor = sub.add_parser("doctor", help="check that replies stream through to you (proxy buffering self-test)")
    p_doctor.add_argument(
        "--url", required=True, help="the address you open Odysseus at, e.g. https://chat.example.org"
    )
    p_doctor.add_argument("--token", default=None, help="an API token (ody_...), if the server needs one")
    p_doctor.set_defaults(func=doctor)
    p_table = sub.add_parser("config-table", help="print docs/guide.md's configuration tables (markdown)")
    p_table.add_argument("section", nargs="?", help="one section (general, runs, agent, ...); default: all")
    p_table.add_argument(
        "--doc", "--readme", dest="doc", metavar="PATH", help="refill the config-table blocks of this markdown file"
    )
    p_table.set_defaults(func=config_table)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
