"""WSGI entry point: gevent's monkey patch first, then the app.

gevent's greenlet-tree tracking is off: with it every spawned greenlet (each request, each run)
captured its spawner's stack, ten objects the collector then walked for as long as the greenlet
lived, and nothing here reads ``spawning_stack`` or ``spawn_tree_locals``.
"""

import gevent
from gevent import monkey

gevent.config.track_greenlet_tree = False

monkey.patch_all()

from odysseus import create_app  # noqa: E402

app = create_app()
