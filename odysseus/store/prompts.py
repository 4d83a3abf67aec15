"""The prompt library: saved prompts a user inserts in the composer by typing their ``/command``.

Every query filters by owner; another user's id is NotFound. A command is unique per owner
(``idx_prompts_owner_command``, m308): a second prompt with the same command is a Conflict, also
when two requests race. ``{{variables}}`` in the content are plain text to the server; the page
asks for each one before inserting the prompt (``variables`` lists them in order).
"""

from __future__ import annotations

import re
import sqlite3
import time
from typing import Any, Dict, List

from ..errors import BadRequest, Conflict, NotFound
from .database import Locked, select_rows
from .sessions import new_id

MAX_TITLE = 200
MAX_COMMAND = 32
MAX_CONTENT = 20_000
MAX_VARIABLES = 20
MAX_PROMPTS = 1000  # per user
COMMAND = re.compile(r"[a-z0-9_-]{1,%d}" % MAX_COMMAND)
#: ``{{name}}`` (spaces inside the braces allowed): a letter or _, then letters, digits, _ and -
VARIABLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_-]{0,39})\s*\}\}")


def variables(content: str) -> List[str]:
    """The distinct ``{{variable}}`` names of ``content``, in the order they first appear."""
    seen: List[str] = []
    for name in VARIABLE.findall(content):
        if name not in seen:
            seen.append(name)
    return seen


def _text(data: dict, key: str) -> Any:
    value = data.get(key)
    if not isinstance(value, str):
        raise BadRequest(f"{key} is required and must be a string")
    if "\x00" in value:
        raise BadRequest(f"{key} must not contain NUL characters")
    return value


def clean_prompt(data: dict, partial: bool) -> Dict[str, str]:
    """Validate prompt fields from a request body (title, command, content); raises BadRequest.

    The title is trimmed with its runs of whitespace made one space; the command is trimmed,
    loses one leading ``/`` and is lower-cased, then must be 1-32 of a-z, 0-9, ``-`` and ``_``.
    """
    out: Dict[str, str] = {}
    if "title" in data or not partial:
        title = " ".join(_text(data, "title").split())
        if not title:
            raise BadRequest("title must not be empty")
        if len(title) > MAX_TITLE:
            raise BadRequest(f"title is longer than {MAX_TITLE} characters")
        out["title"] = title
    if "command" in data or not partial:
        command = _text(data, "command").strip()
        command = (command[1:] if command.startswith("/") else command).lower()
        if not COMMAND.fullmatch(command):
            raise BadRequest(
                f"command must be 1-{MAX_COMMAND} lowercase letters, digits, - or _ (without the slash), like summarize"
            )
        out["command"] = command
    if "content" in data or not partial:
        content = _text(data, "content")
        if not content.strip():
            raise BadRequest("content must not be empty")
        if len(content) > MAX_CONTENT:
            raise BadRequest(f"content is longer than {MAX_CONTENT} characters")
        if len(variables(content)) > MAX_VARIABLES:
            raise BadRequest(f"content names more than {MAX_VARIABLES} different {{{{variables}}}}")
        out["content"] = content
    if partial and not out:
        raise BadRequest("nothing to change (title, command or content)")
    return out


def public_prompt(row: dict) -> dict:
    """A prompt as the API shows it."""
    return {
        "id": row["id"],
        "title": row["title"],
        "command": row["command"],
        "content": row["content"],
        "variables": variables(row["content"]),
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }


def _taken(command: str) -> Conflict:
    return Conflict(f"you already have a prompt with the command /{command}")


class PromptRepo:
    """CRUD over one user's saved prompts."""

    def __init__(self, locked: Locked):
        self._l = locked

    def list(self, owner: str) -> List[dict]:
        """Every prompt of ``owner``, by command."""
        with self._l.read() as db:
            rows = select_rows(db, "select * from prompts where owner = ? order by command", [owner])
        return [public_prompt(r) for r in rows]

    def get(self, owner: str, prompt_id: str) -> dict:
        """One prompt; NotFound for unknown or foreign ids."""
        with self._l.read() as db:
            rows = select_rows(db, "select * from prompts where id = ? and owner = ? limit 1", [prompt_id, owner])
        if not rows:
            raise NotFound("prompt not found")
        return public_prompt(rows[0])

    def create(self, owner: str, fields: Dict[str, str]) -> dict:
        """Store a prompt (``fields`` from ``clean_prompt``); Conflict when the command is taken."""
        now = time.time()
        row = {"id": new_id("prm_"), "owner": owner, **fields, "created_at": now, "updated_at": now}
        try:
            with self._l.tx() as db:
                count = db.execute("select count(*) from prompts where owner = ?", [owner]).fetchone()[0]
                if count >= MAX_PROMPTS:
                    raise BadRequest(f"you already have {count} prompts (the limit); delete some first")
                db.execute(
                    "insert into prompts (id, owner, title, command, content, created_at, updated_at)"
                    " values (:id, :owner, :title, :command, :content, :created_at, :updated_at)",
                    row,
                )
        except sqlite3.IntegrityError:
            raise _taken(fields["command"]) from None
        return public_prompt(row)

    def update(self, owner: str, prompt_id: str, fields: Dict[str, str]) -> dict:
        """Change a prompt's title, command or content; NotFound for foreign ids, Conflict for a taken command."""
        self.get(owner, prompt_id)
        names = sorted(fields)
        try:
            with self._l.tx() as db:
                db.execute(
                    "update prompts set " + ", ".join(f"{name} = ?" for name in names) + ", updated_at = ?"
                    " where id = ? and owner = ?",
                    [*(fields[name] for name in names), time.time(), prompt_id, owner],
                )
        except sqlite3.IntegrityError:
            raise _taken(fields["command"]) from None
        return self.get(owner, prompt_id)

    def delete(self, owner: str, prompt_id: str) -> None:
        """Delete a prompt; NotFound for foreign ids."""
        with self._l.tx() as db:
            if db.execute("delete from prompts where id = ? and owner = ?", [prompt_id, owner]).rowcount == 0:
                raise NotFound("prompt not found")
