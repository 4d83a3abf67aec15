"""Gunicorn settings for long-lived SSE responses on the gevent worker.

Workers: ``ODYSSEUS_WORKERS``; by default one with the in-process run backend (detached runs
live in the worker's memory, so resume and stop must reach the same process: more than one
worker, or a second server on the same data directory, is refused) and one per core with
``RUN_BACKEND=redis`` (any worker serves any run; Redis must answer at start-up).

Shutdown and reload (SIGTERM to a worker, SIGHUP to the master): the worker's run engine
drains (new turns get 503 with Retry-After, running runs get ``SHUTDOWN_GRACE`` seconds, then
end ``interrupted`` with their text saved and their terminal events flushed), so the
graceful timeout is ``SHUTDOWN_GRACE`` plus a margin.
"""

import os
import signal

bind = f"{os.environ.get('HOST', '127.0.0.1')}:{os.environ.get('PORT', '5000')}"
# gunicorn's gevent worker, whose keep-alive connections end with the worker (odysseus/gunicorn_worker.py)
worker_class = "odysseus.gunicorn_worker.DrainingGeventWorker"


def _workers() -> int:
    """ODYSSEUS_WORKERS, else one per core with RUN_BACKEND=redis and one with the in-process backend."""
    from odysseus.config import load_config
    from odysseus.instance import default_workers

    return default_workers(load_config())


workers = _workers()
worker_connections = int(os.environ.get("ODYSSEUS_WORKER_CONNECTIONS", "10000"))
# SSE responses stay open for minutes; the gevent worker's timeout is a heartbeat of the
# worker process itself, not a per-request limit, so keep it generous.
timeout = int(os.environ.get("ODYSSEUS_WORKER_TIMEOUT", "120"))
# runs drain for SHUTDOWN_GRACE; the margin covers their final saves (idle keep-alive connections wait it out)
graceful_timeout = int(float(os.environ.get("ODYSSEUS_SHUTDOWN_GRACE", "20"))) + int(
    os.environ.get("ODYSSEUS_GRACEFUL_MARGIN", "10")
)
keepalive = 75
accesslog = os.environ.get("ODYSSEUS_ACCESS_LOG") or None
errorlog = "-"
loglevel = os.environ.get("ODYSSEUS_LOG_LEVEL", "info")

_instance_lock = None  # held by the master for its whole life (reloads included)


def on_starting(server):
    """Refuse unsafe set-ups before any socket is opened: a public single-user bind, or a second worker/server."""
    global _instance_lock
    from odysseus.bind import bind_host, single_user_refusal
    from odysseus.config import load_config
    from odysseus.instance import claim_data_dir, redis_refusal, worker_refusal

    config = load_config()
    refusal = single_user_refusal(config, [bind_host(b) for b in server.cfg.bind])
    refusal = refusal or worker_refusal(config, server.cfg.workers)
    refusal = refusal or redis_refusal(config)
    if not refusal:
        _instance_lock, refusal = claim_data_dir(config)
    if refusal:
        server.log.error(refusal)
        raise SystemExit(2)


def post_worker_init(worker):
    """On SIGTERM (shutdown, or the old worker of a reload) drain the run engine before gunicorn's own exit;
    and freeze the built app's objects out of the collector's full collections, which also run less
    often from then on (runs/heap_trim.py)."""
    from odysseus.runs.heap_trim import freeze_startup_heap

    engine = worker.wsgi.extensions["odysseus.runs"]
    gunicorn_exit = worker.handle_exit

    def handle_exit(sig, frame):
        import gevent

        gevent.spawn(engine.begin_shutdown)  # a signal handler must not block: drain in a greenlet
        gunicorn_exit(sig, frame)

    signal.signal(signal.SIGTERM, handle_exit)
    freeze_startup_heap()


def worker_exit(server, worker):
    """Do not let the worker process end before its runs are saved (it may have no open connection left)."""
    engine = getattr(getattr(worker, "wsgi", None), "extensions", {}).get("odysseus.runs")
    if engine is not None:
        engine.finish_shutdown(timeout=graceful_timeout)
    from odysseus.gunicorn_worker import quiet_interpreter_exit

    quiet_interpreter_exit()
