"""Gunicorn settings for long-lived SSE responses on the gevent worker.

One worker by default: detached runs live in the worker's memory, so resume and stop
must reach the same process. Concurrency comes from greenlets, not processes.
"""

import os

bind = f"{os.environ.get('HOST', '127.0.0.1')}:{os.environ.get('PORT', '5000')}"
worker_class = "gevent"
workers = int(os.environ.get("ODYSSEUS_WORKERS", "1"))
worker_connections = int(os.environ.get("ODYSSEUS_WORKER_CONNECTIONS", "10000"))
# SSE responses stay open for minutes; the gevent worker's timeout is a heartbeat of the
# worker process itself, not a per-request limit, so keep it generous.
timeout = int(os.environ.get("ODYSSEUS_WORKER_TIMEOUT", "120"))
graceful_timeout = 10
keepalive = 75
accesslog = os.environ.get("ODYSSEUS_ACCESS_LOG") or None
errorlog = "-"
loglevel = os.environ.get("ODYSSEUS_LOG_LEVEL", "info")


def on_starting(server):
    """Refuse ODYSSEUS_AUTH=none on a public bind before any socket is opened (also catches -b)."""
    from odysseus.bind import bind_host, single_user_refusal
    from odysseus.config import load_config

    refusal = single_user_refusal(load_config(), [bind_host(b) for b in server.cfg.bind])
    if refusal:
        server.log.error(refusal)
        raise SystemExit(2)
