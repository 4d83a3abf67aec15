"""WSGI entry point: gevent's monkey patch first, then the app."""

from gevent import monkey

monkey.patch_all()

from odysseus import create_app  # noqa: E402

app = create_app()
