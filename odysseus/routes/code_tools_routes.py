"""Code tools over HTTP: who may use them (admin routes) and their health.

What a turn is offered is ``agent/toolbox.py`` (``decide``, ``offer``): no Flask there.

- ``GET /api/code-tools``: the sandbox status and whether the caller may use the code tools (and why not).
- ``GET /api/admin/code-tools``: the sandbox status, every user's setting, the profiles with one.
- ``PATCH /api/admin/users/<user_id>/code-tools`` ``{"code_tools": bool}``.
- ``PATCH /api/admin/profiles/<profile_id>/code-tools`` ``{"code_tools": bool|null, "network": bool}``.

All three are admin only (403 for anybody else); unknown ids are 404. The sandbox status
comes from the start-up probe (``odysseus.tools.sandbox.startup_status``).
"""

from __future__ import annotations

from flask import Blueprint, current_app, g, jsonify

from ..agent.toolbox import decide
from ..errors import BadRequest, Forbidden
from .auth import current_user
from .params import body

bp = Blueprint("code_tools", __name__)


def _store():
    return current_app.extensions["odysseus.store"]


def sandbox_status() -> dict:
    """The start-up probe's answer: ``{available, sandbox, reason}``."""
    return current_app.extensions["odysseus.agent"].sandbox.to_dict()


def health_info() -> dict:
    """``/api/health``'s ``code_tools``: the sandbox status (health names no caller and reads no database)."""
    return sandbox_status()


@bp.get("/api/code-tools")
def caller_access():
    """The sandbox status, plus whether the caller may use the code tools (``allowed``) and, if not, why."""
    info = sandbox_status()
    access = decide(_store(), current_app.config, g.odysseus_owner, None)
    info["allowed"] = bool(info["available"] and access.code_tools)
    if info["available"] and not access.code_tools:
        info["reason"] = access.reason
    return jsonify(info)


def _admin() -> dict:
    user = current_user()
    if not user["is_admin"]:
        raise Forbidden("only an admin may do this")
    return user


def _bool(data: dict, key: str, nullable: bool = False):
    value = data[key]
    if value is None and nullable:
        return None
    if not isinstance(value, bool):
        raise BadRequest(f"{key} must be true or false" + (" (or null)" if nullable else ""))
    return value


@bp.get("/api/admin/code-tools")
def overview():
    """The sandbox status and every code-tools setting (admin only)."""
    _admin()
    store = _store()
    users = []
    for user in store.users.list():
        access = store.code_access.decide(auth="password", user=user, profile_id=None)
        users.append({**user, "code_tools": access.code_tools, "setting": store.code_access.user_setting(user["id"])})
    return jsonify({"sandbox": sandbox_status(), "users": users, "profiles": store.code_access.list_profiles()})


@bp.patch("/api/admin/users/<user_id>/code-tools")
def set_user(user_id: str):
    """Allow or refuse the code tools for one user (admin only)."""
    admin = _admin()
    data = body()
    if "code_tools" not in data:
        raise BadRequest("code_tools is required")
    allowed = _bool(data, "code_tools")
    _store().code_access.set_user(user_id, allowed, admin["id"])
    return jsonify({"user_id": user_id, "code_tools": allowed})


@bp.patch("/api/admin/profiles/<profile_id>/code-tools")
def set_profile(profile_id: str):
    """Set a profile's ``code_tools`` (null: the user's setting) and ``network`` (admin only)."""
    admin = _admin()
    data = body()
    changes = {}
    if "code_tools" in data:
        changes["code_tools"] = _bool(data, "code_tools", nullable=True)
    if "network" in data:
        changes["network"] = _bool(data, "network")
    if not changes:
        raise BadRequest("send code_tools and/or network")
    return jsonify(_store().code_access.set_profile(profile_id, changes, admin["id"]))
