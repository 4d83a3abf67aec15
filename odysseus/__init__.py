"""Odysseus: a self-hosted LLM chat where a response is never lost."""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional

from flask import Flask

__version__ = "0.1.0"


def create_app(test_config: Optional[Mapping[str, Any]] = None) -> Flask:
    """Build the app: config, each part's ``init_app``, blueprints. Nothing else."""
    from . import config as config_module
    from . import context, engine, routes

    app = Flask(__name__, instance_relative_config=False,
                template_folder=os.path.join(os.path.dirname(os.path.dirname(__file__)), "templates"),
                static_folder=os.path.join(os.path.dirname(os.path.dirname(__file__)), "static"))
    app.config.update(config_module.load_config(overrides=test_config))
    app.config["MAX_CONTENT_LENGTH"] = int(app.config["MAX_BODY_BYTES"])
    engine.init_app(app)
    context.init_app(app)
    from .context import memories, web_sources, workspace  # context sources, in the order of their events

    for source in (workspace, web_sources, memories):
        source.init_app(app)
    routes.init_app(app)
    return app
