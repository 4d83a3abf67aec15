"""Share links (issue 36, item 3): make, list and revoke them; serve a link's read-only snapshot.

``POST /api/sessions/{id}/share`` snapshots the chat (``chats/snapshot.py``) and answers
``{id, url, path, ...}``; the url is ``/s/<token>`` on this origin. ``GET /s/<token>`` needs no
sign-in: the snapshot as a page (``templates/share.html``: the markdown is rendered in the browser by
the chat page's own renderer, ``static/js/share.js``; the server writes each message as escaped text
first, which is what a reader without scripts sees) or, with ``?format=json``, as
``{title, messages: [{role, content, exhibits?}], shared_at}``. A revoked link, or one whose chat was
deleted, answers 404.
"""

from __future__ import annotations

import re

from flask import Blueprint, current_app, jsonify, render_template, request
from flask.typing import ResponseReturnValue

from ..chats.snapshot import MAX_SHARED_MESSAGES, build_snapshot
from ..errors import BadRequest, NotFound
from .auth import current_owner, public
from .parts import ext

bp = Blueprint("shares", __name__)
#: a token as ``store/shares.new_token`` makes it; anything else is not looked up
_TOKEN = re.compile(r"[A-Za-z0-9_-]{32}")
#: the snapshot page: never cached (a revoked link must stop at once), never indexed, no referrer
#: (the token is in the URL: a link clicked in a shared reply must not carry it to another site)
_PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Robots-Tag": "noindex, nofollow",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "base-uri 'none'; form-action 'none'; object-src 'none'; frame-ancestors 'none'",
}


def share_path(token: str) -> str:
    """The path of a share's page."""
    return f"/s/{token}"


def _view(share: dict) -> dict:
    """A share as its owner sees it: the link, and which chat it snapshots."""
    path = share_path(share["token"])
    return {
        "id": share["id"],
        "url": request.host_url.rstrip("/") + path,
        "path": path,
        "session_id": share["session_id"],
        "title": share["title"],
        "message_count": share["message_count"],
        "created_at": share["created_at"],
    }


@bp.post("/api/sessions/<session_id>/share")
def create_share(session_id: str):
    """Snapshot the caller's chat (its selected branch, as it is now) behind a new unguessable link."""
    owner = current_owner()
    store = ext("store")
    session = store.sessions.get(owner, session_id)
    messages, more = store.messages.page(owner, session_id, None, MAX_SHARED_MESSAGES)
    if more:
        raise BadRequest(f"this chat is too long to share (over {MAX_SHARED_MESSAGES} messages)")
    share = store.shares.create(owner, session_id, build_snapshot(session["title"], messages))
    return jsonify(_view(share)), 201


@bp.get("/api/shares")
def list_shares():
    """The caller's share links, newest first."""
    return jsonify({"shares": [_view(share) for share in ext("store").shares.list(current_owner())]})


@bp.delete("/api/shares/<share_id>")
def revoke_share(share_id: str):
    """Revoke a share link: its url answers 404 from now on."""
    ext("store").shares.delete(current_owner(), share_id)
    return jsonify({"deleted": True})


@bp.get("/s/<token>")
@public
def shared_chat(token: str) -> ResponseReturnValue:
    """A shared chat's snapshot, for anyone holding the link: a read-only page, or JSON with ``?format=json``."""
    kind = request.args.get("format") or "html"
    if kind not in ("html", "json"):
        raise BadRequest("format must be html or json")
    snapshot = ext("store").shares.snapshot(token) if _TOKEN.fullmatch(token) else None
    if kind == "json":
        if snapshot is None:
            raise NotFound("this link is not shared (it was revoked, or its chat was deleted)")
        response = jsonify(snapshot)
    else:
        page = render_template("share.html", snapshot=snapshot)
        response = current_app.make_response((page, 200 if snapshot else 404))
    response.headers.update(_PAGE_HEADERS)
    return response
