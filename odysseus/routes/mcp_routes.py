"""The admin's MCP servers (settings screen): list, add, edit, remove and Test.

The configuration's servers (``[mcp_servers.NAME]``) are listed read-only (``source: "config"``);
stored ones (``source: "database"``) are editable. Header and env values never leave the server:
views carry ``{set, last4}`` for each. An edit may send a header or env value as ``null`` to keep
the stored one; a stored header goes only to the URL it was entered for (a new ``url`` needs the
headers again). The single-user owner (``AUTH=none``) counts as admin, as for providers.

- ``GET /api/admin/mcp-servers`` -> ``{servers: [view + status]}``
- ``POST /api/admin/mcp-servers`` ``{name, command|url, ...}`` -> 201 view
- ``PATCH /api/admin/mcp-servers/<name>``, ``DELETE /api/admin/mcp-servers/<name>``
- ``POST /api/admin/mcp-servers/<name>/test`` -> ``{ok, tools: [{name, description}], latency_ms}``
  or ``{ok: false, error}``: a fresh connection (initialize, list the tools, close)
"""

from __future__ import annotations

from typing import Any, Dict

from flask import Blueprint, current_app, g, jsonify, request

from ..errors import BadRequest, Conflict, Forbidden
from ..mcp.servers import ServerSpec, check_name, check_transport, public_view, spec_from, validate
from .auth import auth_method, current_user
from .params import body

bp = Blueprint("mcp_servers", __name__)
MAX_BODY = 64 * 1024  # a server's definition is small; anything bigger is refused before it is parsed


def _service() -> Any:
    return current_app.extensions["odysseus.mcp"]


def _repo() -> Any:
    return current_app.extensions["odysseus.store"].mcp_servers


def _admin() -> Dict[str, Any]:
    """An admin account, or the owner in single-user mode (who owns the whole install)."""
    if auth_method() == "none" and g.get("odysseus_user") is None:
        return {"id": g.odysseus_owner, "is_admin": True}
    user = current_user()
    if not user["is_admin"]:
        raise Forbidden("only an admin may do this")
    return user


def _body() -> Dict[str, Any]:
    request.max_content_length = MAX_BODY
    return body()


def _view(spec: ServerSpec) -> Dict[str, Any]:
    view = public_view(spec)
    view["status"] = _service().status().get(spec.name) or {"state": "idle", "error": None, "tools": None}
    return view


def _config(name: str) -> bool:
    return name in _service().config_specs


def _refuse_config(name: str, doing: str) -> None:
    if _config(name):
        raise Conflict(
            f"the MCP server {name!r} comes from the configuration (ODYSSEUS_CONFIG) and cannot be {doing} here"
        )


@bp.get("/api/admin/mcp-servers")
def list_servers():
    """Every MCP server: the configuration's (read-only), then the stored ones, each with its state."""
    _admin()
    servers = _service().servers()
    return jsonify({"servers": [_view(spec) for spec in servers.values()]})


@bp.post("/api/admin/mcp-servers")
def create_server():
    """Store a new server (admin only); turns may use it at once."""
    admin = _admin()
    data = _body()
    name = check_name(data.get("name"))
    fields = validate(data)
    if _config(name):
        raise Conflict(f"the configuration already has an MCP server named {name!r}; pick another name")
    spec = _repo().create(name, fields, admin["id"])
    _service().sync(force=True)
    return jsonify(_view(spec)), 201


@bp.patch("/api/admin/mcp-servers/<name>")
def update_server(name: str):
    """Change a stored server (admin only); ``null`` header/env values keep the stored ones."""
    _admin()
    _refuse_config(name, "changed")
    changes = validate(_body(), partial=True, keep_secrets=True)
    if "name" in changes and changes.pop("name") != name:
        raise BadRequest("a server cannot be renamed: add it under the new name and remove this one")
    saved = _repo().get(name)  # 404 before anything else
    url = changes.get("url", saved.url)
    if saved.headers and url != saved.url:
        given = changes.get("headers")
        if given is None or any(value is None for value in given.values()):
            raise BadRequest("the URL changed: enter the headers again (stored headers are sent only to their own URL)")
    for key in ("env", "headers"):
        if key in changes:
            changes[key] = _kept(key, changes[key], getattr(saved, key))
    merged = {**saved.fields(), **changes}
    check_transport(merged)
    spec = _repo().update(name, spec_from(name, merged, "database").fields())
    _service().sync(force=True)
    return jsonify(_view(spec))


def _kept(key: str, given: Dict[str, Any], stored: Any) -> Dict[str, str]:
    """Header or env values as sent, ``null`` standing for the stored value of that name."""
    out = {}
    for name, value in given.items():
        if value is None:
            if name not in stored:
                raise BadRequest(f"{key}.{name} has no stored value to keep: give one")
            value = stored[name]
        out[name] = value
    return out


@bp.delete("/api/admin/mcp-servers/<name>")
def delete_server(name: str):
    """Remove a stored server (admin only); its process ends and its tools are offered no more."""
    _admin()
    _refuse_config(name, "removed")
    _repo().delete(name)
    _service().sync(force=True)
    return jsonify({"deleted": name})


@bp.post("/api/admin/mcp-servers/<name>/test")
def test_server(name: str):
    """Connect afresh, initialize, list the tools (admin only): ``{ok, tools, latency_ms}`` or the error."""
    _admin()
    spec = _service().config_specs.get(name) or _repo().get(name)
    result = _service().test(spec, timeout=_service().start_timeout())
    if result.get("ok"):
        tools = [{"name": t.get("name"), "description": t.get("description") or ""} for t in result.get("tools") or []]
        return jsonify({"ok": True, "tools": tools, "latency_ms": result.get("latency_ms")})
    return jsonify({"ok": False, "error": result.get("error") or "the test failed"})
