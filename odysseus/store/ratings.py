"""Ratings of replies: thumbs up (1) or down (-1) with an optional comment, stored with the message (m310).

Only the owner's own assistant messages can be rated; anything else (a user message, another
user's reply, an unknown id) is NotFound, exactly alike. A message's rating goes with it: deleting
the message or its session deletes the rating. The model a rating counts for is the one that
answered (``metadata.model_info``), read when the aggregate is asked for.
"""

from __future__ import annotations

import time
from typing import List, Optional, Tuple

from ..errors import BadRequest, NotFound
from .database import Locked, select_rows
from .messages import rating_of

MAX_COMMENT = 2000
VALUES = (1, -1)
#: the route that answered a reply, as its metadata recorded it ("unknown" for replies without one)
_MODEL = (
    "coalesce(json_extract(metadata, '$.model_info.route'),"
    " json_extract(metadata, '$.model_info.provider') || '/' || json_extract(metadata, '$.model_info.model'),"
    " 'unknown')"
)


def clean_rating(data: dict) -> Tuple[int, Optional[str]]:
    """``value`` (1 or -1) and ``comment`` (trimmed; empty means none) from a request body; raises BadRequest."""
    value = data.get("value")
    if isinstance(value, bool) or value not in VALUES or not isinstance(value, int):
        raise BadRequest("value must be 1 (thumbs up) or -1 (thumbs down)")
    comment = data.get("comment")
    if comment is not None:
        if not isinstance(comment, str):
            raise BadRequest("comment must be a string")
        if "\x00" in comment:
            raise BadRequest("comment must not contain NUL characters")
        comment = comment.strip()
        if len(comment) > MAX_COMMENT:
            raise BadRequest(f"comment is longer than {MAX_COMMENT} characters")
    return value, comment or None


class RatingRepo:
    """Rate, unrate and list the ratings of one user's replies; the admin's count per model."""

    def __init__(self, locked: Locked):
        self._l = locked

    def set(self, owner: str, message_id: int, value: int, comment: Optional[str]) -> dict:
        """Rate the owner's reply ``message_id`` (replacing any rating); NotFound unless it is one."""
        now = time.time()
        with self._l.tx() as db:
            changed = db.execute(
                "update messages set rating = ?, rating_comment = ?, rated_at = ?"
                " where id = ? and owner = ? and role = 'assistant'",
                [value, comment, now, message_id, owner],
            ).rowcount
        if not changed:
            raise NotFound("message not found (only your own replies can be rated)")
        return {"message_id": message_id, "rating": rating_of(value, comment, now)}

    def clear(self, owner: str, message_id: int) -> dict:
        """Remove the rating of the owner's reply ``message_id`` (none is fine); NotFound unless it is one."""
        with self._l.tx() as db:
            changed = db.execute(
                "update messages set rating = null, rating_comment = null, rated_at = null"
                " where id = ? and owner = ? and role = 'assistant'",
                [message_id, owner],
            ).rowcount
        if not changed:
            raise NotFound("message not found (only your own replies can be rated)")
        return {"message_id": message_id, "rating": None}

    def list(self, owner: str, limit: int, offset: int = 0) -> List[dict]:
        """The owner's rated replies, newest rating first: ids, the rating, the model and the session's title."""
        with self._l.read() as db:
            rows = select_rows(
                db,
                f"select m.id, m.session_id, s.title, m.rating, m.rating_comment, m.rated_at, {_MODEL} as model,"
                " substr(m.content, 1, 200) as excerpt from messages m join sessions s on s.id = m.session_id"
                " where m.owner = ? and m.rating is not null order by m.rated_at desc, m.id desc limit ? offset ?",
                [owner, limit, offset],
            )
        return [
            {
                "message_id": row["id"],
                "session_id": row["session_id"],
                "session_title": row["title"],
                "value": row["rating"],
                "comment": row["rating_comment"],
                "rated_at": row["rated_at"],
                "model": row["model"],
                "excerpt": row["excerpt"] or "",
            }
            for row in rows
        ]

    def per_model(self) -> List[dict]:
        """Every user's ratings counted per answering model: ``{model, up, down, total}``, most rated first."""
        with self._l.read() as db:
            rows = db.execute(
                f"select {_MODEL} as model, sum(rating = 1), sum(rating = -1), count(*) from messages"
                " where rating is not null group by model order by count(*) desc, model"
            ).fetchall()
        return [{"model": model, "up": up, "down": down, "total": total} for model, up, down, total in rows]
