"""Ratings of replies (issue 36): thumbs up or down on the caller's own replies, their list, and the admin's
count per model."""

from __future__ import annotations

from flask import Blueprint, g, jsonify

from ..errors import Forbidden
from ..store.ratings import clean_rating
from .auth import auth_method, current_owner, current_user
from .history_routes import MESSAGE_ID
from .params import body, page_args
from .parts import ext

bp = Blueprint("ratings", __name__)


def _ratings():
    return ext("store").ratings


@bp.put(f"/api/messages/{MESSAGE_ID}/rating")
def rate_message(message_id: int):
    """Rate one of the caller's replies: ``value`` 1 or -1, an optional ``comment``; replaces any rating."""
    owner = current_owner()
    value, comment = clean_rating(body())
    return jsonify(_ratings().set(owner, message_id, value, comment))


@bp.delete(f"/api/messages/{MESSAGE_ID}/rating")
def unrate_message(message_id: int):
    """Remove the rating of one of the caller's replies."""
    return jsonify(_ratings().clear(current_owner(), message_id))


@bp.get("/api/ratings")
def list_ratings():
    """The caller's rated replies, newest rating first (``limit``, ``offset``)."""
    limit, offset = page_args(50, 500)
    ratings = _ratings().list(current_owner(), limit + 1, offset)
    more = len(ratings) > limit
    return jsonify({"ratings": ratings[:limit], "next_offset": offset + limit if more else None})


@bp.get("/api/admin/ratings")
def ratings_per_model():
    """Every user's ratings counted per model that answered (an admin, or the single-user owner)."""
    if not (auth_method() == "none" and g.get("odysseus_user") is None):
        if not current_user()["is_admin"]:
            raise Forbidden("only an admin may do this")
    return jsonify({"models": _ratings().per_model()})
