"""The core parts every other part uses, in ``app.extensions``: store, accounts, providers/router, run engine.

Wired first by the composition root (``odysseus.composition``).
"""

from __future__ import annotations

import logging

from flask import Flask

from .accounts import Accounts, load_or_create_secret
from .llm.provider_sync import SyncedRouter
from .runs.engine import RunEngine
from .store import Store, database_path

log = logging.getLogger(__name__)


def init_app(app: Flask) -> None:
    """Open the store, accounts, providers and the run engine; recover interrupted runs."""
    config = app.config
    if not config.get("SECRET_KEY"):
        # One secret per install, not per process: restarts and extra workers keep sign-ins valid.
        config["SECRET_KEY"] = load_or_create_secret(config["DATA_DIR"])
    store = Store(database_path(config))
    # config providers plus the admin's stored ones, rebuilt when those change (llm/provider_sync.py)
    router = SyncedRouter(config, store, on_change=lambda: app.extensions.pop("odysseus.models", None))
    engine = RunEngine(store, config)
    # [issue 40] turns leave the search index to batches on the writer's thread (store/search.py, m312)
    store.search.use_writer(engine.durable.write)

    def index_new_messages() -> None:
        store.search.catch_up()

    engine.maintenance.append(index_new_messages)
    try:
        recovered = engine.recover_interrupted()
    except Exception:  # the server still boots when recovery fails; the janitor tries again
        log.exception("recovering interrupted runs failed")
        recovered = []
    if recovered:
        log.warning("marked %d interrupted run(s) from a previous process", len(recovered))
    app.extensions["odysseus.store"] = store
    accounts = Accounts(store, config)
    accounts.adopt_single_user_data()
    app.extensions["odysseus.accounts"] = accounts
    app.extensions["odysseus.router"] = router
    app.extensions["odysseus.runs"] = engine
    engine.start_background()
