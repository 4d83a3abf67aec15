"""The router's provider set: configuration (env/TOML) plus the admin's stored connections, kept current.

Invariants:

- Config providers are built once and never replaced; names are unique across both sources
  (the API refuses a stored name a config provider uses; should the config gain that name
  later, the config one wins and the stored one is skipped with a warning).
- The demo provider is there only when neither source has a provider.
- ``sync()`` compares the store's ``provider_connections_version`` with the one the set was
  built from: at most every ``SYNC_INTERVAL`` seconds, or at once with ``force`` (each turn's
  ``resolve`` and every ``/api/models`` read force it: one primary-key SELECT). A changed version
  rebuilds the stored providers (unchanged rows keep their provider object and its
  connection pool), swaps the dict in one assignment and calls ``on_change`` (the app drops
  its model catalog). Runs already streaming hold their provider object and are unaffected.
- A ``name/model`` of a connection that was deleted, renamed or disabled is a 404: the names come
  from what this process saw and from the store's ``retired_provider_names`` (a worker that never
  loaded the connection, or one started after the delete, knows them too).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Dict, List, Optional

from ..errors import NotFound
from .base import Provider, ProviderConfig
from .connections import to_config
from .llm_core import Candidate, ModelRouter
from .registry import build_provider

log = logging.getLogger(__name__)
SYNC_INTERVAL = 2.0


class SyncedRouter(ModelRouter):
    """A ModelRouter whose ``providers`` follow the stored connections (see the module docstring)."""

    def __init__(self, app_config: dict, store, on_change: Optional[Callable[[], None]] = None):
        self._app_config = app_config
        self._store = store
        self._on_change = on_change
        self._lock = threading.Lock()
        self._config_providers: List[Provider] = [
            build_provider(cfg, app_config) for cfg in app_config.get("PROVIDERS") or []
        ]
        self._stored: Dict[tuple, Provider] = {}  # (id, updated_at) -> provider
        self._version: Optional[int] = None
        self._checked_at = 0.0
        self._providers: Dict[str, Provider] = {}
        self._retired: set = set()  # stored names seen in this process that are now removed or disabled
        super().__init__([], app_config.get("ROUTES"), app_config.get("DEFAULT_MODEL", ""))
        self.sync(force=True)

    @property
    def providers(self) -> Dict[str, Provider]:
        """name -> provider, current within SYNC_INTERVAL seconds."""
        self.sync()
        return self._providers

    @providers.setter
    def providers(self, value: Dict[str, Provider]) -> None:
        self._providers = value  # ModelRouter.__init__ sets an empty dict; sync() fills it

    @property
    def config_names(self) -> List[str]:
        """The names the configuration uses (a stored connection may not take them)."""
        return [p.name for p in self._config_providers] + (["demo"] if not self._config_providers else [])

    def resolve(self, model: Optional[str]) -> List[Candidate]:
        """As ModelRouter.resolve, on the current set (a turn start always checks the version)."""
        self.sync(force=True)
        return super().resolve(model)

    def _candidate(self, spec: str) -> Candidate:
        """As ModelRouter's, but a removed or disabled connection's ``name/model`` is a clear 404, never
        a bare model name handed to the only remaining provider."""
        name = spec.partition("/")[0]
        if name.lower() in self._retired and name not in self._providers:
            raise NotFound(f"unknown model {spec!r}: provider {name!r} was removed or disabled")
        return super()._candidate(spec)

    def sync(self, force: bool = False) -> bool:
        """Rebuild from the store when its version moved; True when the set changed."""
        now = time.monotonic()
        if not force and now - self._checked_at < SYNC_INTERVAL and self._version is not None:
            return False
        try:
            version = self._store.provider_connections.version()
        except Exception:  # a failing read keeps the current set; the next check tries again
            log.exception("reading provider_connections_version failed")
            return False
        self._checked_at = now
        if version == self._version:
            return False
        with self._lock:
            if version == self._version:
                return False
            rows = self._store.provider_connections.list()
            retired = self._store.provider_connections.retired_names()
            self._providers = self._build(rows, retired)
            self._version = version
        if self._on_change is not None:
            self._on_change()
        return True

    def _build(self, rows: List[dict], retired: Optional[set] = None) -> Dict[str, Provider]:
        providers = {p.name: p for p in self._config_providers}
        taken = {name.lower() for name in providers}
        stored: Dict[tuple, Provider] = {}
        for row in rows:
            if not row["enabled"]:
                continue
            if row["name"].lower() in taken:
                log.warning("stored provider %r is shadowed by a configured provider of that name", row["name"])
                continue
            key = (row["id"], row["updated_at"])
            provider = self._stored.get(key)
            if provider is None:
                try:
                    provider = build_provider(to_config(row), self._app_config)
                except Exception:  # one bad row never takes the others down
                    log.exception("building stored provider %r failed", row["name"])
                    continue
            stored[key] = provider
            providers[provider.name] = provider
            taken.add(provider.name.lower())
        live = {name.lower() for name in providers}
        self._retired = (
            self._retired
            | (retired or set())
            | {row["name"].lower() for row in rows}
            | {p.name.lower() for p in self._stored.values()}
        ) - live
        self._stored = stored
        if not providers:
            providers["demo"] = build_provider(ProviderConfig(name="demo", kind="demo"), self._app_config)
        return providers
