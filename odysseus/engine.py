"""Wires the per-app parts into ``app.extensions``: store, providers/router, run engine."""

from __future__ import annotations

import logging
import os
import secrets

from flask import Flask

from .llm.llm_core import ModelRouter
from .llm.registry import build_providers
from .runs.agent_runs import RunManager
from .store import Store

log = logging.getLogger(__name__)


def database_path(config: dict) -> str:
    """Where the SQLite file lives (``DATABASE`` overrides ``DATA_DIR``/odysseus.db)."""
    return config.get("DATABASE") or os.path.join(config["DATA_DIR"], "odysseus.db")


def init_app(app: Flask) -> None:
    """Open the store, build providers and the run engine, recover interrupted runs."""
    config = app.config
    if not config.get("SECRET_KEY"):
        config["SECRET_KEY"] = secrets.token_hex(32)
    store = Store(database_path(config))
    router = ModelRouter(build_providers(config), config.get("ROUTES"), config.get("DEFAULT_MODEL", ""))
    manager = RunManager(store, config)
    recovered = manager.recover_interrupted()
    if recovered:
        log.warning("marked %d interrupted run(s) from a previous process", len(recovered))
    app.extensions["odysseus.store"] = store
    app.extensions["odysseus.router"] = router
    app.extensions["odysseus.runs"] = manager
