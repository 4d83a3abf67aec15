"""The settings screen's API: the caller's own settings, and the admin's account management."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify

from .. import preferences
from ..accounts import check_new_password, hash_password
from ..errors import BadRequest, Conflict, Forbidden
from .auth import current_owner, current_user
from .params import body

bp = Blueprint("settings", __name__)


def _store():
    return current_app.extensions["odysseus.store"]


def _admin() -> dict:
    user = current_user()
    if not user["is_admin"]:
        raise Forbidden("only an admin may do this")
    return user


@bp.get("/api/user/settings")
def get_settings():
    """The caller's settings (defaults filled in) and the limits the page shows."""
    owner = current_owner()
    return jsonify(
        {
            "settings": preferences.user_settings(_store(), owner),
            "limits": {
                "max_message_chars": int(current_app.config["MAX_MESSAGE_CHARS"]),
                "max_system_prompt": preferences.MAX_SYSTEM_PROMPT,
            },
        }
    )


@bp.patch("/api/user/settings")
def update_settings():
    """Change some of the caller's settings; null resets one to its default. Nothing is stored on a bad value."""
    owner = current_owner()
    changes = preferences.validate(body())
    preferences.update_settings(_store(), owner, changes)
    return jsonify({"settings": preferences.user_settings(_store(), owner)})


@bp.get("/api/admin/users")
def list_users():
    """Every account with its admin flag and disabled state (admin only)."""
    _admin()
    return jsonify({"users": _store().user_admin.list()})


@bp.patch("/api/admin/users/<user_id>")
def update_user(user_id: str):
    """Set ``is_admin`` and/or ``disabled`` (admin only; never for the caller's own account)."""
    admin = _admin()
    data = body()
    changes = {}
    for key in ("is_admin", "disabled"):
        if key in data:
            if not isinstance(data[key], bool):
                raise BadRequest(f"{key} must be true or false")
            changes[key] = data[key]
    if not changes:
        raise BadRequest("send is_admin and/or disabled")
    if user_id == admin["id"]:
        raise Conflict("you cannot change your own admin flag or disable yourself")
    return jsonify(_store().user_admin.update(user_id, **changes))


@bp.post("/api/admin/users/<user_id>/password")
def reset_password(user_id: str):
    """Set another account's password (admin only); that user is signed out everywhere."""
    _admin()
    store = _store()
    store.user_admin.get(user_id)  # 404 first
    password = check_new_password(body().get("new_password"))
    store.users.set_password(user_id, hash_password(password))
    return jsonify(store.user_admin.get(user_id))
