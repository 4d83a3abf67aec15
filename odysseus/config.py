"""Configuration: defaults -> TOML file (``ODYSSEUS_CONFIG``) -> ``ODYSSEUS_*`` env -> test overrides.

Keys are flat upper-case names (Flask style). Environment variables are the key
prefixed with ``ODYSSEUS_`` (``ODYSSEUS_HEARTBEAT_INTERVAL=5``) and are parsed as
the type of the default. The TOML file uses the same keys in lower case at top
level, plus ``[[providers]]`` tables, a ``[routes]`` table and ``[mcp_servers.NAME]`` tables
(``MCP_SERVERS``, validated by ``odysseus.mcp.servers``). Providers also come
from the conventional variables ``OPENAI_BASE_URL``/``OPENAI_API_KEY``,
``OLLAMA_HOST`` and ``ANTHROPIC_API_KEY``/``ANTHROPIC_BASE_URL``, each with an optional
``OPENAI_MODEL`` / ``OLLAMA_MODEL`` / ``ANTHROPIC_MODEL`` default model.

Every key is declared in ``odysseus.config_keys`` (default, type, help, guide section); an
``ODYSSEUS_*`` variable or a TOML key naming no key is logged as a warning with the closest key,
once per process: gunicorn's master warns while it reads its settings and the workers it forks
inherit what was already said, so one start-up says each thing once (not once per worker).
"""

from __future__ import annotations

import difflib
import logging
import os
import tomllib
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

from . import config_keys
from .errors import OdysseusError
from .llm.base import ProviderConfig

log = logging.getLogger(__name__)

#: Key -> default, derived from the declarations in ``odysseus.config_keys`` (name, default, type, help).
DEFAULTS: Dict[str, Any] = config_keys.defaults()


def _coerce(key: str, raw: str) -> Any:
    default = DEFAULTS.get(key)
    try:
        if isinstance(default, bool):
            return raw.strip().lower() in ("1", "true", "yes", "on")
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
    except ValueError as exc:
        raise OdysseusError(f"ODYSSEUS_{key}={raw!r} is not a valid {type(default).__name__}") from exc
    return raw


def providers_from_env(env: Mapping[str, str]) -> List[ProviderConfig]:
    """Providers named by the conventional variables, in a fixed order."""
    found: List[ProviderConfig] = []
    if env.get("OLLAMA_HOST"):
        host = env["OLLAMA_HOST"]
        if "://" not in host:
            host = "http://" + host
        found.append(
            ProviderConfig(
                name="ollama", kind="ollama", base_url=host.rstrip("/"), default_model=env.get("OLLAMA_MODEL") or None
            )
        )
    if env.get("OPENAI_BASE_URL") or env.get("OPENAI_API_KEY"):
        found.append(
            ProviderConfig(
                name="openai",
                kind="openai",
                base_url=(env.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/"),
                api_key=env.get("OPENAI_API_KEY") or None,
                default_model=env.get("OPENAI_MODEL") or None,
            )
        )
    if env.get("ANTHROPIC_API_KEY") or env.get("ANTHROPIC_BASE_URL"):
        found.append(
            ProviderConfig(
                name="anthropic",
                kind="anthropic",
                base_url=(env.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com").rstrip("/"),
                api_key=env.get("ANTHROPIC_API_KEY") or None,
                default_model=env.get("ANTHROPIC_MODEL") or None,
            )
        )
    return found


def providers_from_toml(tables: List[Dict[str, Any]]) -> List[ProviderConfig]:
    """Providers from ``[[providers]]`` tables."""
    known = {"name", "kind", "base_url", "api_key", "models", "default_model"}
    result = []
    for table in tables:
        if "kind" not in table:
            raise OdysseusError("each [[providers]] table needs a kind")
        api_key = table.get("api_key")
        if table.get("api_key_env"):
            api_key = os.environ.get(table["api_key_env"], api_key)
        models, windows = model_entries(table.get("models", []))
        options = {k: v for k, v in table.items() if k not in known and k != "api_key_env"}
        if windows:
            options["model_context_length"] = windows  # odysseus.context.window reads it
        result.append(
            ProviderConfig(
                name=table.get("name", table["kind"]),
                kind=table["kind"],
                base_url=(table.get("base_url") or None) and table["base_url"].rstrip("/"),
                api_key=api_key,
                models=models,
                default_model=table.get("default_model"),
                options=options,
            )
        )
    return result


def model_entries(entries: List[Any]) -> Tuple[List[str], Dict[str, int]]:
    """A provider's ``models``: names, or tables ``{name = "...", context_length = N}``; (names, {name: N})."""
    names: List[str] = []
    windows: Dict[str, int] = {}
    for entry in entries:
        if isinstance(entry, dict):
            if not isinstance(entry.get("name"), str) or not entry["name"]:
                raise OdysseusError("a [[providers]] models table needs a name")
            names.append(entry["name"])
            if entry.get("context_length") is not None:
                windows[entry["name"]] = int(entry["context_length"])
        else:
            names.append(entry)
    return names, windows


#: Top-level TOML tables read as tables rather than flattened into keys (``TABLES``).
TOML_TABLES = frozenset({"prices"})
#: Warnings already logged by this process (or by the gunicorn master it was forked from).
_said: Set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _said:
        _said.add(message)
        log.warning("%s", message)


def warn_unknown_variables(env: Mapping[str, str]) -> None:
    """Log a warning for every ``ODYSSEUS_*`` variable that names no key, with the closest known name."""
    for name, close in config_keys.unknown_variables(env):
        hint = f"; did you mean {close}?" if close else ""
        _warn_once(f"unknown configuration variable {name} (not a key of odysseus.config_keys){hint}")


def unknown_toml_keys(doc: Mapping[str, Any]) -> List[str]:
    """Keys of an ``ODYSSEUS_CONFIG`` document (providers and routes already taken out) that name no key,
    as written (``heartbeat_intervl``, ``citations.flg``), each with the closest key in the same spelling."""
    found = []
    known = [name.lower() for name in DEFAULTS]
    for key, value in doc.items():
        if isinstance(value, dict):
            if key.lower() in TOML_TABLES:
                continue
            for sub, sub_value in value.items():
                if isinstance(sub_value, dict) or f"{key}_{sub}".upper() not in DEFAULTS:
                    found.append((f"{key}.{sub}", f"{key}_{sub}".lower()))
        elif key.upper() not in DEFAULTS:
            found.append((key, key.lower()))
    out = []
    for shown, flat in found:
        close = difflib.get_close_matches(flat, known, n=1, cutoff=0.75)
        out.append(f"{shown} (did you mean {close[0]}?)" if close else shown)
    return out


def load_config(
    env: Optional[Mapping[str, str]] = None, overrides: Optional[Mapping[str, Any]] = None, warn: bool = True
) -> Dict[str, Any]:
    """Build the flat config dict, including ``PROVIDERS`` (list of ProviderConfig) and ``ROUTES``.

    ``warn=False`` reads without warning about unknown keys (``odysseus serve``, which execs gunicorn:
    its master warns)."""
    env = os.environ if env is None else env
    config: Dict[str, Any] = dict(DEFAULTS)
    toml_providers: List[Dict[str, Any]] = []
    routes: Dict[str, List[str]] = {}
    mcp_servers: Any = {}
    extra: Dict[str, Any] = {}
    path = env.get("ODYSSEUS_CONFIG")
    if path:
        try:
            with open(path, "rb") as fh:
                doc = tomllib.load(fh)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise OdysseusError(f"cannot read ODYSSEUS_CONFIG {path}: {exc}") from exc
        toml_providers = doc.pop("providers", [])
        mcp_servers = doc.pop("mcp_servers", {})  # [mcp_servers.NAME] tables: odysseus/mcp/servers.py
        for unknown in unknown_toml_keys({k: v for k, v in doc.items() if k != "routes"}) if warn else []:
            _warn_once(f"unknown key {unknown} in ODYSSEUS_CONFIG {path} (not a key of odysseus.config_keys)")
        routes = {
            name: list(spec.get("candidates", spec) if isinstance(spec, dict) else spec)
            for name, spec in doc.pop("routes", {}).items()
        }
        for key, value in doc.items():
            if isinstance(value, dict):
                extra[key] = value  # nested tables (prices, citations, ...) kept as is
                for sub, sub_value in value.items():  # [citations] flag = x -> CITATIONS_FLAG
                    flat = f"{key}_{sub}".upper()
                    if flat in DEFAULTS and not isinstance(sub_value, dict):
                        config[flat] = sub_value
            else:
                config[key.upper()] = value
    if warn:
        warn_unknown_variables(env)
    for name, raw in env.items():
        if name.startswith("ODYSSEUS_") and name != "ODYSSEUS_CONFIG":
            key = name[len("ODYSSEUS_") :]
            config[key] = _coerce(key, raw)
    config["PROVIDERS"] = providers_from_toml(toml_providers) + [
        p for p in providers_from_env(env) if p.name not in {t.get("name", t["kind"]) for t in toml_providers}
    ]
    config["ROUTES"] = routes
    config["MCP_SERVERS"] = mcp_servers
    config["TABLES"] = extra
    if overrides:
        config.update(overrides)
    return config
