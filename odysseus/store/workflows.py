"""Agent Alloy workflows: a supervisor agent and the specialist agents it may delegate to.

A workflow is ``{id, name, description?, supervisor_agent_id, members: [{agent_id, role,
delegation_hint?}]}``, owned by one user. Its id is lowercase letters, digits and dashes,
unique per owner (generated, unguessable, when the client names none). Rules, checked on
every create and change against the owner's agents in the same transaction: exactly one
member is the supervisor and it is ``supervisor_agent_id``; at least one specialist; no
agent listed twice; every agent exists and belongs to the owner.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import time
from typing import List, Optional

from ..errors import BadRequest, Conflict, NotFound
from .database import Locked

WORKFLOW_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
ROLES = ("supervisor", "specialist")
MAX_MEMBERS = 20
FIELDS = ("id", "name", "description", "supervisor_agent_id", "members")


def new_workflow_id() -> str:
    """``wf-`` + 128 random bits in lowercase base32 (fits the id pattern)."""
    return "wf-" + base64.b32encode(secrets.token_bytes(16)).decode().rstrip("=").lower()


def _text(data: dict, key: str, limit: int, required: bool) -> Optional[str]:
    value = data.get(key)
    if value is None or (value == "" and not required):
        if required:
            raise BadRequest(f"{key} is required")
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{key} must be a string")
    if required and not value.strip():
        raise BadRequest(f"{key} must not be empty")
    if len(value) > limit:
        raise BadRequest(f"{key} is longer than {limit} characters")
    return value


def _members(value) -> List[dict]:
    if not isinstance(value, list) or not value:
        raise BadRequest("members must be a non-empty list of {agent_id, role, delegation_hint?}")
    if len(value) > MAX_MEMBERS:
        raise BadRequest(f"a workflow has at most {MAX_MEMBERS} members")
    members, seen = [], set()
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise BadRequest(f"members[{index}] must be an object")
        agent_id = item.get("agent_id")
        if not isinstance(agent_id, str) or not agent_id:
            raise BadRequest(f"members[{index}].agent_id must be a non-empty string")
        if len(agent_id) > 100:
            raise BadRequest(f"members[{index}].agent_id is too long")
        role = item.get("role")
        if role not in ROLES:
            raise BadRequest(f'members[{index}].role must be "supervisor" or "specialist"')
        if agent_id in seen:
            raise BadRequest(f"agent {agent_id!r} is listed twice; each agent is a member once")
        seen.add(agent_id)
        member = {"agent_id": agent_id, "role": role}
        hint = _text(item, "delegation_hint", 1000, required=False) if "delegation_hint" in item else None
        if hint is not None:
            member["delegation_hint"] = hint
        members.append(member)
    return members


def clean_workflow(data: dict) -> dict:
    """Validate a whole workflow object (create, or an existing one merged with a change)."""
    workflow_id = data.get("id")
    if workflow_id is not None and (not isinstance(workflow_id, str) or not WORKFLOW_ID.match(workflow_id)):
        raise BadRequest("id must be 1-64 lowercase letters, digits and dashes, starting with a letter or digit")
    members = _members(data.get("members"))
    supervisors = [m["agent_id"] for m in members if m["role"] == "supervisor"]
    if len(supervisors) != 1:
        raise BadRequest(f"a workflow needs exactly one member with role supervisor (found {len(supervisors)})")
    supervisor = data.get("supervisor_agent_id")
    if supervisor is None:
        supervisor = supervisors[0]
    if not isinstance(supervisor, str):
        raise BadRequest("supervisor_agent_id must be a string")
    if supervisor != supervisors[0]:
        raise BadRequest(
            f"supervisor_agent_id {supervisor!r} must be the member whose role is supervisor ({supervisors[0]!r})"
        )
    if len(members) < 2:
        raise BadRequest("a workflow needs at least one specialist besides the supervisor")
    return {
        "id": workflow_id,
        "name": (_text(data, "name", 200, required=True) or "").strip(),
        "description": _text(data, "description", 2000, required=False),
        "supervisor_agent_id": supervisor,
        "members": members,
    }


def _decode(row: dict) -> dict:
    return {
        "id": row["id"],
        "name": row["name"],
        "description": row.get("description"),
        "supervisor_agent_id": row["supervisor_agent_id"],
        "members": json.loads(row["members"]),
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }


class WorkflowRepo:
    """CRUD for the owner's workflows."""

    def __init__(self, locked: Locked):
        self._l = locked

    @staticmethod
    def _check_agents(db, owner: str, workflow: dict) -> None:
        for member in workflow["members"]:
            found = db.execute(
                "select 1 from agents where owner = ? and agent_id = ?", [owner, member["agent_id"]]
            ).fetchone()
            if found is None:  # the same answer for unknown and foreign agents
                raise BadRequest(f"agent {member['agent_id']!r} not found; create it first (POST /api/agents)")

    def create(self, owner: str, data: dict) -> dict:
        """Validate and store a new workflow; Conflict when the owner already uses its id."""
        workflow = clean_workflow(data)
        now = time.time()
        with self._l.tx() as db:
            self._check_agents(db, owner, workflow)
            if workflow["id"] is None:
                workflow["id"] = new_workflow_id()
            elif db.execute("select 1 from workflows where owner = ? and id = ?", [owner, workflow["id"]]).fetchone():
                raise Conflict(f"workflow id {workflow['id']!r} is already used")
            db.table("workflows").insert(
                {
                    **workflow,
                    "owner": owner,
                    "members": json.dumps(workflow["members"]),
                    "created_at": now,
                    "updated_at": now,
                }
            )
        return self.get(owner, workflow["id"])

    def get(self, owner: str, workflow_id: str) -> dict:
        """The owner's workflow or NotFound (also for another owner's id)."""
        with self._l.read() as db:
            rows = list(db["workflows"].rows_where("owner = ? and id = ?", [owner, workflow_id], limit=1))
        if not rows:
            raise NotFound(f"workflow {workflow_id!r} not found")
        return _decode(rows[0])

    def list(self, owner: str) -> List[dict]:
        """The owner's workflows, oldest first."""
        with self._l.read() as db:
            return [_decode(r) for r in db["workflows"].rows_where("owner = ?", [owner], order_by="created_at")]

    def update(self, owner: str, workflow_id: str, changes: dict) -> dict:
        """Apply the fields given in ``changes``, validating the whole result; the id never changes."""
        current = self.get(owner, workflow_id)
        if "id" in changes and changes["id"] != workflow_id:
            raise BadRequest("a workflow's id cannot be changed")
        if "members" in changes and "supervisor_agent_id" not in changes:
            current["supervisor_agent_id"] = None  # follow the members' supervisor
        merged = {key: changes.get(key, current.get(key)) for key in FIELDS}
        workflow = clean_workflow(merged)
        with self._l.tx() as db:
            self._check_agents(db, owner, workflow)
            db.execute(
                "update workflows set name = ?, description = ?, supervisor_agent_id = ?, members = ?,"
                " updated_at = ? where owner = ? and id = ?",
                [
                    workflow["name"],
                    workflow["description"],
                    workflow["supervisor_agent_id"],
                    json.dumps(workflow["members"]),
                    time.time(),
                    owner,
                    workflow_id,
                ],
            )
        return self.get(owner, workflow_id)

    def delete(self, owner: str, workflow_id: str) -> None:
        """Delete the owner's workflow (NotFound when there is none)."""
        self.get(owner, workflow_id)
        with self._l.tx() as db:
            db.execute("delete from workflows where owner = ? and id = ?", [owner, workflow_id])
