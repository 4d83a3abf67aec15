"""Builds provider objects from configuration; the demo model when nothing is configured."""

from __future__ import annotations

from typing import Callable, Dict, List

from ..errors import OdysseusError
from .base import Provider, ProviderConfig
from .demo import DemoProvider

#: kind -> factory(ProviderConfig, app_config) -> Provider. Adapters register here.
ADAPTERS: Dict[str, Callable[[ProviderConfig, dict], Provider]] = {
    "demo": lambda cfg, app_config: DemoProvider(
        name=cfg.name, token_delay=float(cfg.options.get("token_delay", app_config.get("DEMO_TOKEN_DELAY", 0.03))),
        reply_words=int(cfg.options.get("reply_words", 0))),
}


def register_adapter(kind: str, factory: Callable[[ProviderConfig, dict], Provider]) -> None:
    """Make ``kind`` available to ``[[providers]]`` tables."""
    ADAPTERS[kind] = factory


def build_providers(app_config: dict) -> List[Provider]:
    """One provider per configured table or env variable; the demo provider when there are none."""
    configs: List[ProviderConfig] = list(app_config.get("PROVIDERS") or [])
    if not configs:
        configs = [ProviderConfig(name="demo", kind="demo")]
    providers = []
    for cfg in configs:
        factory = ADAPTERS.get(cfg.kind)
        if factory is None:
            raise OdysseusError(f"provider {cfg.name!r}: unknown kind {cfg.kind!r} (known: {sorted(ADAPTERS)})")
        provider = factory(cfg, app_config)
        if cfg.default_model and not getattr(provider, "default_model", None):
            provider.default_model = cfg.default_model
        providers.append(provider)
    return providers
