"""The admin's provider connections (settings screen): list, add, edit, remove and "send one token".

Stored connections are editable (``source: "database"``); the ones from the environment or
the TOML file are listed read-only (``source: "config"``, id ``config:NAME``). No answer ever
carries a key: views show ``api_key_last4`` only, and probe errors are scrubbed of it.
"""

from __future__ import annotations

from typing import List, Optional

from flask import Blueprint, current_app, g, jsonify, request

from ..errors import BadRequest, Conflict, Forbidden, NotFound
from ..llm.base import ProviderConfig
from ..llm.connections import probe, to_config, validate
from ..store.provider_connections import key_last4, public_view
from .auth import auth_method, current_user
from .params import body

bp = Blueprint("providers", __name__)
MAX_BODY = 64 * 1024  # a connection is small; anything bigger is refused before it is parsed
CONFIG_PREFIX = "config:"


def _store():
    return current_app.extensions["odysseus.store"]


def _router():
    return current_app.extensions["odysseus.router"]


def _admin() -> dict:
    """The admin managing providers: an admin account, or the owner in single-user mode (``AUTH=none``,
    loopback only), who has no account to be an admin with and owns the whole install."""
    if auth_method() == "none" and g.get("odysseus_user") is None:
        return {"id": g.odysseus_owner, "is_admin": True}
    user = current_user()
    if not user["is_admin"]:
        raise Forbidden("only an admin may do this")
    return user


def _body() -> dict:
    request.max_content_length = MAX_BODY
    return body()


def _config_providers() -> List[ProviderConfig]:
    return list(current_app.config.get("PROVIDERS") or [])


def _config_view(cfg: ProviderConfig) -> dict:
    return {
        "id": CONFIG_PREFIX + cfg.name,
        "name": cfg.name,
        "kind": cfg.kind,
        "base_url": cfg.base_url,
        "default_model": cfg.default_model,
        "models": list(cfg.models),
        "enabled": True,
        "source": "config",
        "read_only": True,
        "api_key_set": bool(cfg.api_key),
        "api_key_last4": key_last4(cfg.api_key),
    }


def _config_named(provider_id: str):
    """The config provider an id (``config:NAME`` or a bare NAME) names, else None."""
    name = provider_id[len(CONFIG_PREFIX) :] if provider_id.startswith(CONFIG_PREFIX) else provider_id
    return next((cfg for cfg in _config_providers() if cfg.name == name), None)


def _refuse_config_name(name: str) -> None:
    names = getattr(_router(), "config_names", None) or [cfg.name for cfg in _config_providers()]
    if name.lower() in {n.lower() for n in names}:
        raise Conflict(f"the configuration already has a provider named {name!r}; pick another name")


def _changed() -> None:
    """New turns and /api/models use the new set at once in this worker (others within seconds)."""
    sync = getattr(_router(), "sync", None)
    if sync is not None:
        sync(force=True)
    current_app.extensions.pop("odysseus.models", None)


@bp.before_app_request
def _keep_providers_current():
    """Pick up connections another worker changed (cheap; forced for the model list)."""
    sync = getattr(current_app.extensions.get("odysseus.router"), "sync", None)
    if sync is not None:
        sync(force=request.path == "/api/models")


@bp.get("/api/admin/providers")
def list_providers():
    """Every provider: the configuration's (read-only) then the stored ones (admin only)."""
    _admin()
    stored = [public_view(row) for row in _store().provider_connections.list()]
    return jsonify({"providers": [_config_view(cfg) for cfg in _config_providers()] + stored})


@bp.post("/api/admin/providers")
def create_provider():
    """Store a new connection (admin only); its models are offered to new turns at once."""
    admin = _admin()
    fields = validate(_body())
    _refuse_config_name(fields["name"])
    row = _store().provider_connections.create(fields, admin["id"])
    _changed()
    return jsonify(public_view(row)), 201


@bp.patch("/api/admin/providers/<provider_id>")
def update_provider(provider_id: str):
    """Change a stored connection; an absent api_key keeps the key, "" clears it (admin only)."""
    _admin()
    if _config_named(provider_id):
        raise Conflict("this provider comes from the configuration (environment or TOML) and is read-only here")
    changes = validate(_body(), partial=True)
    store = _store()
    saved = store.provider_connections.get(provider_id)  # 404 before anything else
    if "api_key" not in changes:
        _refuse_key_to_new_url(saved, changes.get("base_url", saved.get("base_url")))
    if "name" in changes:
        _refuse_config_name(changes["name"])
    row = store.provider_connections.update(provider_id, changes)
    _changed()
    return jsonify(public_view(row))


@bp.delete("/api/admin/providers/<provider_id>")
def delete_provider(provider_id: str):
    """Remove a stored connection (admin only); runs already streaming from it finish."""
    _admin()
    if _config_named(provider_id):
        raise Conflict("this provider comes from the configuration (environment or TOML) and cannot be removed here")
    _store().provider_connections.delete(provider_id)
    _changed()
    return jsonify({"deleted": provider_id})


def _model(data: dict):
    model = data.get("model")
    if model is not None and (not isinstance(model, str) or not model.strip() or len(model) > 200):
        raise BadRequest("model must be a non-empty string of at most 200 characters")
    return model.strip() if model else None


@bp.post("/api/admin/providers/<provider_id>/test")
def test_provider(provider_id: str):
    """Send one token through a saved (or configured) provider; answers ok/latency or the failure."""
    _admin()
    data = _body()
    cfg = _config_named(provider_id)
    if cfg is None:
        cfg = to_config(_store().provider_connections.get(provider_id))
    return jsonify(probe(cfg, current_app.config, _model(data)))


@bp.post("/api/admin/providers/test")
def test_unsaved_provider():
    """Send one token with the form's values (not stored); ``id`` fills in a saved key left blank."""
    _admin()
    data = _body()
    fields = validate({"name": "test", **data})
    if "api_key" not in data and isinstance(data.get("id"), str):
        try:
            saved = _store().provider_connections.get(data["id"])
        except NotFound:
            raise NotFound("provider not found") from None
        _refuse_key_to_new_url(saved, fields.get("base_url"))
        fields["api_key"] = saved.get("api_key") or ""
    return jsonify(probe(to_config(fields), current_app.config, _model(data)))


def _refuse_key_to_new_url(saved: dict, base_url: Optional[str]) -> None:
    """A stored key goes only to the URL it was entered for: a new base_url needs the key again.

    Otherwise an admin session (or a stolen one) could send the stored key to any server by
    changing the URL and pressing Test or Save, and read it there."""
    if saved.get("api_key") and (base_url or "") != (saved.get("base_url") or ""):
        raise BadRequest("the base URL changed: enter the API key again (a stored key is sent only to its own URL)")
