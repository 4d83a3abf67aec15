"""The ``odysseus`` command: ``serve`` (gunicorn + gevent) and ``init-db``."""

from __future__ import annotations

import argparse
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
    root = _project_root()
    conf = os.path.join(root, "gunicorn.conf.py")
    os.chdir(root)
    argv = [sys.executable, "-m", "gunicorn", "-c", conf, "wsgi:app"]
    os.execv(sys.executable, argv)
    return 0  # not reached


def init_db(args: argparse.Namespace) -> int:
    """Create the database and apply migrations."""
    from .config import load_config
    from .engine import database_path
    from .store import Store

    path = database_path(load_config())
    Store(path)
    print(f"database ready: {path}")
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
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
