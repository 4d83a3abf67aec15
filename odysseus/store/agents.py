"""Agent profiles (system prompt, model route, tool set, temperature) and named agents.

An agent is addressed by a Docker-style ``agent_id`` (two lower-case words joined by an
underscore), unique per owner; it may build on a profile and override its fields.
"""

from __future__ import annotations

import json
import random
import re
import secrets
import time
from typing import Any, Dict, List, Optional

from ..errors import BadRequest, Conflict, NotFound
from .database import Locked

AGENT_ID = re.compile(r"^[a-z]+_[a-z]+$")
_ADJECTIVES = (
    "brave",
    "calm",
    "clever",
    "eager",
    "gentle",
    "happy",
    "keen",
    "lucid",
    "nimble",
    "quiet",
    "bold",
    "witty",
    "swift",
    "steady",
    "sharp",
    "merry",
    "jolly",
    "wise",
    "vivid",
    "zen",
)
_NAMES = (
    "turing",
    "hopper",
    "lovelace",
    "curie",
    "noether",
    "shannon",
    "knuth",
    "ritchie",
    "hamilton",
    "euler",
    "gauss",
    "kepler",
    "darwin",
    "franklin",
    "goodall",
    "meitner",
    "ramanujan",
    "tesla",
)
FIELDS = ("name", "system_prompt", "model", "tools", "temperature")


def _decode(row: dict) -> dict:
    row = dict(row)
    row["tools"] = json.loads(row["tools"]) if row.get("tools") else None
    if "is_default" in row:
        row["is_default"] = bool(row["is_default"])
    return row


def clean_fields(data: dict, partial: bool) -> dict:
    """Validate profile/agent fields from a request body."""
    out: Dict[str, Any] = {}
    for key in FIELDS:
        if key not in data:
            continue
        value = data[key]
        if key == "tools":
            if value is not None and (not isinstance(value, list) or not all(isinstance(t, str) for t in value)):
                raise BadRequest("tools must be a list of tool names")
            out[key] = json.dumps(value) if value is not None else None
        elif key == "temperature":
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 2
            ):
                raise BadRequest("temperature must be a number between 0 and 2")
            out[key] = value
        else:
            if value is not None and not isinstance(value, str):
                raise BadRequest(f"{key} must be a string")
            if key == "name" and value is not None:  # shown in lists and pickers: one trimmed line
                value = " ".join(value.split())
                if not value:
                    raise BadRequest("name must not be empty")
            if value is not None and len(value) > (20_000 if key == "system_prompt" else 200):
                raise BadRequest(f"{key} is too long")
            out[key] = value
    if not partial and not out.get("name"):
        raise BadRequest("name is required")
    return out


class ProfileRepo:
    """CRUD for agent profiles."""

    def __init__(self, locked: Locked):
        self._l = locked

    def create(self, owner: str, fields: dict, is_default: bool = False) -> dict:
        """Create a profile."""
        now = time.time()
        row: Dict[str, Any] = {
            "id": "prof_" + secrets.token_urlsafe(12),
            "owner": owner,
            "system_prompt": None,
            "model": None,
            "tools": None,
            "temperature": None,
            "is_default": 0,
            "created_at": now,
            "updated_at": now,
        }
        row.update(fields)
        with self._l.tx() as db:
            if is_default:
                db.execute("update agent_profiles set is_default = 0 where owner = ?", [owner])
                row["is_default"] = 1
            db.table("agent_profiles").insert(row)
        return self.get(owner, row["id"])

    def get(self, owner: str, profile_id: str) -> dict:
        """The owner's profile or NotFound."""
        with self._l.read() as db:
            rows = list(db["agent_profiles"].rows_where("id = ? and owner = ?", [profile_id, owner], limit=1))
        if not rows:
            raise NotFound(f"agent profile {profile_id!r} not found")
        return _decode(rows[0])

    def default(self, owner: str) -> Optional[dict]:
        """The owner's default profile, if one is marked."""
        with self._l.read() as db:
            rows = list(db["agent_profiles"].rows_where("owner = ? and is_default = 1", [owner], limit=1))
        return _decode(rows[0]) if rows else None

    def list(self, owner: str) -> List[dict]:
        """The owner's profiles."""
        with self._l.read() as db:
            return [_decode(r) for r in db["agent_profiles"].rows_where("owner = ?", [owner], order_by="created_at")]

    def update(self, owner: str, profile_id: str, fields: dict, is_default: Optional[bool] = None) -> dict:
        """Change a profile's fields (and whether it is the default)."""
        self.get(owner, profile_id)
        with self._l.tx() as db:
            if is_default:
                db.execute("update agent_profiles set is_default = 0 where owner = ?", [owner])
            changes = dict(fields, updated_at=time.time())
            if is_default is not None:
                changes["is_default"] = 1 if is_default else 0
            db.table("agent_profiles").update(profile_id, changes)
        return self.get(owner, profile_id)

    def delete(self, owner: str, profile_id: str) -> None:
        """Delete a profile."""
        self.get(owner, profile_id)
        with self._l.tx() as db:
            db.execute("delete from agent_profiles where id = ? and owner = ?", [profile_id, owner])


class AgentRepo:
    """CRUD for named agents."""

    def __init__(self, locked: Locked):
        self._l = locked

    def _taken(self, db, owner: str, agent_id: str) -> bool:
        return (
            db.execute("select 1 from agents where owner = ? and agent_id = ?", [owner, agent_id]).fetchone()
            is not None
        )

    def create(
        self, owner: str, fields: dict, agent_id: Optional[str] = None, profile_id: Optional[str] = None
    ) -> dict:
        """Create an agent, generating a free Docker-style id when none is given."""
        if agent_id is not None and not AGENT_ID.match(agent_id):
            raise BadRequest("agent_id must be two lower-case words joined by an underscore, like brave_turing")
        now = time.time()
        with self._l.tx() as db:
            if agent_id is None:
                rng = random.SystemRandom()
                for _ in range(200):
                    candidate = f"{rng.choice(_ADJECTIVES)}_{rng.choice(_NAMES)}"
                    if not self._taken(db, owner, candidate):
                        agent_id = candidate
                        break
                else:
                    raise Conflict("no free agent id; name one explicitly")
            elif self._taken(db, owner, agent_id):
                raise Conflict(f"agent_id {agent_id!r} is already used")
            row = {
                "agent_id": agent_id,
                "owner": owner,
                "profile_id": profile_id,
                "system_prompt": None,
                "model": None,
                "tools": None,
                "temperature": None,
                "created_at": now,
                "updated_at": now,
            }
            row.update(fields)
            db.table("agents").insert(row)
        return self.get(owner, agent_id)

    def get(self, owner: str, agent_id: str) -> dict:
        """The owner's agent or NotFound."""
        with self._l.read() as db:
            rows = list(db["agents"].rows_where("owner = ? and agent_id = ?", [owner, agent_id], limit=1))
        if not rows:
            raise NotFound(f"agent {agent_id!r} not found")
        return _decode(rows[0])

    def list(self, owner: str) -> List[dict]:
        """The owner's agents."""
        with self._l.read() as db:
            return [_decode(r) for r in db["agents"].rows_where("owner = ?", [owner], order_by="created_at")]

    def update(self, owner: str, agent_id: str, fields: dict) -> dict:
        """Change an agent's fields."""
        self.get(owner, agent_id)
        with self._l.tx() as db:
            db.execute(
                "update agents set " + ", ".join(f"{k} = ?" for k in fields) + ", updated_at = ?"
                " where owner = ? and agent_id = ?",
                [*fields.values(), time.time(), owner, agent_id],
            )
        return self.get(owner, agent_id)

    def delete(self, owner: str, agent_id: str) -> None:
        """Delete an agent."""
        self.get(owner, agent_id)
        with self._l.tx() as db:
            db.execute("delete from agents where owner = ? and agent_id = ?", [owner, agent_id])
