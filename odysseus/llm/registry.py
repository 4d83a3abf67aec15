"""Builds provider objects from configuration; the demo model when nothing is configured."""

from __future__ import annotations

from typing import Callable, Dict, List

from ..errors import OdysseusError
from .anthropic import AnthropicProvider
from .base import Provider, ProviderConfig
from .demo import DemoProvider
from .ollama import OllamaProvider
from .openai_compat import OpenAICompatProvider

#: kind -> factory(ProviderConfig, app_config) -> Provider: the adapters a ``[[providers]]`` table may name.
ADAPTERS: Dict[str, Callable[[ProviderConfig, dict], Provider]] = {
    "demo": lambda cfg, app_config: DemoProvider(
        name=cfg.name,
        token_delay=float(cfg.options.get("token_delay", app_config.get("DEMO_TOKEN_DELAY", 0.03))),
        reply_words=int(cfg.options.get("reply_words", 0)),
    ),
    "openai": OpenAICompatProvider,
    "ollama": OllamaProvider,
    "anthropic": AnthropicProvider,
}
#: Other names people use for an OpenAI-compatible server.
for _alias in ("openai_compat", "llamacpp", "llama.cpp", "vllm", "lmstudio", "openrouter", "groq"):
    ADAPTERS[_alias] = OpenAICompatProvider


def build_provider(cfg: ProviderConfig, app_config: dict) -> Provider:
    """One provider object for one configuration (its adapter, default model and prices)."""
    factory = ADAPTERS.get(cfg.kind)
    if factory is None:
        raise OdysseusError(f"provider {cfg.name!r}: unknown kind {cfg.kind!r} (known: {sorted(ADAPTERS)})")
    provider = factory(cfg, app_config)
    if cfg.default_model and not getattr(provider, "default_model", None):
        provider.default_model = cfg.default_model
    provider.prices = prices_for(cfg.name, app_config)
    return provider


def build_providers(app_config: dict) -> List[Provider]:
    """One provider per configured table or env variable; the demo provider when there are none."""
    configs: List[ProviderConfig] = list(app_config.get("PROVIDERS") or [])
    if not configs:
        configs = [ProviderConfig(name="demo", kind="demo")]
    return [build_provider(cfg, app_config) for cfg in configs]


def prices_for(provider_name: str, app_config: dict) -> Dict[str, dict]:
    """model -> price entry from ``[prices."provider/model"]`` tables; a bare ``[prices."model"]`` fits any provider."""
    table = (app_config.get("TABLES") or {}).get("prices") or {}
    exact: Dict[str, dict] = {}
    bare: Dict[str, dict] = {}
    for key, entry in table.items():
        if not isinstance(entry, dict):
            continue
        name, sep, model = key.partition("/")
        if not sep:
            bare[key] = entry
        elif name == provider_name:
            exact[model] = entry
    return {**bare, **exact}
