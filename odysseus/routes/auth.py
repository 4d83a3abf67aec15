"""Who is asking. Until accounts exist there is one local owner; every route asks here."""

from __future__ import annotations

from flask import current_app


def current_owner() -> str:
    """The owner id of the caller (raises Unauthorized once sign-in is required)."""
    return current_app.config["LOCAL_OWNER"]
