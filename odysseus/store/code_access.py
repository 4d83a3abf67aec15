"""Who may use the code tools (``run_python``, ``shell``): the admin's per-user and per-profile settings.

The decision, in password mode:

- a profile setting ``code_tools`` (true/false) set by an admin wins for turns run with that
  profile; otherwise
- a user setting ``code_tools`` set by an admin; otherwise
- the default: on for admins, off for everyone else (so a new account starts without them).

``network`` (the sandbox may reach the network) exists only per profile and defaults to off.
In single-user mode (``AUTH=none``) the one owner may use the code tools, without network
unless its profile says so. Rows have no ``owner`` column on purpose: they are instance
settings, not user data (and are not adopted from single-user mode).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Dict, List, Optional

from ..errors import NotFound
from .database import Locked

USER, PROFILE = "user", "profile"


@dataclass
class CodeAccess:
    """The outcome for one turn: may the code tools be offered, with network, and why."""

    code_tools: bool
    network: bool
    reason: str


def _flag(value) -> Optional[bool]:
    return None if value is None else bool(value)


class CodeAccessRepo:
    """Read and change the code-tools settings; ``decide`` is the one policy."""

    def __init__(self, locked: Locked):
        self._l = locked

    def _row(self, kind: str, target_id: str) -> dict:
        with self._l.read() as db:
            rows = list(db["code_tools_access"].rows_where("kind = ? and target_id = ?", [kind, target_id], limit=1))
        return rows[0] if rows else {}

    def _set(self, kind: str, target_id: str, changes: dict, by: str) -> dict:
        with self._l.tx() as db:
            row: dict = {"kind": kind, "target_id": target_id, "code_tools": None, "network": None}
            existing = list(
                db["code_tools_access"].rows_where("kind = ? and target_id = ?", [kind, target_id], limit=1)
            )
            if existing:
                row.update(existing[0])
            row.update(changes, updated_by=by, updated_at=time.time())
            db.table("code_tools_access").upsert(row, pk=("kind", "target_id"))
        return row

    def user_setting(self, user_id: str) -> Optional[bool]:
        """The admin's explicit setting for this user, or None (the default applies)."""
        return _flag(self._row(USER, user_id).get("code_tools"))

    def set_user(self, user_id: str, code_tools: bool, by: str) -> None:
        """Allow or refuse the code tools for one user (NotFound for an unknown user)."""
        with self._l.read() as db:
            if db.execute("select 1 from users where id = ?", [user_id]).fetchone() is None:
                raise NotFound("user not found")
        self._set(USER, user_id, {"code_tools": 1 if code_tools else 0}, by)

    def profile_settings(self, profile_id: str) -> dict:
        """``{"code_tools": bool|None, "network": bool}`` for a profile."""
        row = self._row(PROFILE, profile_id)
        return {"code_tools": _flag(row.get("code_tools")), "network": bool(row.get("network"))}

    def set_profile(self, profile_id: str, changes: Dict[str, Optional[bool]], by: str) -> dict:
        """Change a profile's settings (any owner's profile: this is the admin's call)."""
        with self._l.read() as db:
            found = db.execute("select owner, name from agent_profiles where id = ?", [profile_id]).fetchone()
        if found is None:
            raise NotFound("agent profile not found")
        values = {key: (None if value is None else int(bool(value))) for key, value in changes.items()}
        self._set(PROFILE, profile_id, values, by)
        return {"profile_id": profile_id, "owner": found[0], "name": found[1], **self.profile_settings(profile_id)}

    def list_profiles(self) -> List[dict]:
        """Every profile that has a setting, with its owner and name."""
        with self._l.read() as db:
            rows = db.execute(
                "select a.target_id, a.code_tools, a.network, p.owner, p.name from code_tools_access a"
                " join agent_profiles p on p.id = a.target_id where a.kind = ? order by p.created_at",
                [PROFILE],
            ).fetchall()
        return [
            {"profile_id": r[0], "code_tools": _flag(r[1]), "network": bool(r[2]), "owner": r[3], "name": r[4]}
            for r in rows
        ]

    def decide(self, *, auth: str, user: Optional[dict], profile_id: Optional[str]) -> CodeAccess:
        """May this caller's turn (with this profile) be offered the code tools, and with network?"""
        profile: dict = self.profile_settings(profile_id) if profile_id else {"code_tools": None, "network": False}
        if profile["code_tools"] is not None:
            return CodeAccess(
                profile["code_tools"],
                profile["code_tools"] and profile["network"],
                "set for this agent profile by an admin",
            )
        if auth == "none":
            return CodeAccess(True, profile["network"], "single-user mode")
        if user is None:
            return CodeAccess(False, False, "no account")
        setting = self.user_setting(user["id"])
        if setting is not None:
            return CodeAccess(
                setting,
                setting and profile["network"],
                "allowed by an admin" if setting else "turned off for this account by an admin",
            )
        if user.get("is_admin"):
            return CodeAccess(True, profile["network"], "admins may use the code tools")
        return CodeAccess(False, False, "an admin has not allowed the code tools for this account")
