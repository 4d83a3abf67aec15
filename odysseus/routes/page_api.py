"""Wiring of the chat page's own API (issue #20): search/export/import, settings, the self-test, titles."""

from __future__ import annotations

from flask import Flask

from ..chats.titles import TitleWriter


def init_app(app: Flask) -> None:
    """Register the page's blueprints and the title writer (a ``run_finished`` receiver for this app)."""
    from . import chats_routes, diagnostics_routes, settings_routes

    for module in (chats_routes, settings_routes, diagnostics_routes):
        app.register_blueprint(module.bp)
    ext = app.extensions
    writer = ext["odysseus.titles"] = TitleWriter(
        ext["odysseus.store"], ext["odysseus.router"], ext["odysseus.runs"], app.config
    )
    ext["odysseus.runs"].hooks.run_finished.connect(writer.on_run_finished)
