"""The prompt library (the caller's own only): saved prompts the composer inserts by ``/command``."""

from __future__ import annotations

from flask import Blueprint, jsonify

from ..store.prompts import clean_prompt
from .auth import current_owner
from .params import body
from .parts import ext

bp = Blueprint("prompts", __name__)


def _prompts():
    return ext("store").prompts


@bp.get("/api/prompts")
def list_prompts():
    """The caller's prompts, by command."""
    return jsonify({"prompts": _prompts().list(current_owner())})


@bp.post("/api/prompts")
def create_prompt():
    """Save a prompt: ``title``, ``command`` (without the slash) and ``content``; 409 when the command is taken."""
    prompt = _prompts().create(current_owner(), clean_prompt(body(), partial=False))
    return jsonify(prompt), 201


@bp.get("/api/prompts/<prompt_id>")
def get_prompt(prompt_id: str):
    """One prompt."""
    return jsonify(_prompts().get(current_owner(), prompt_id))


@bp.patch("/api/prompts/<prompt_id>")
def update_prompt(prompt_id: str):
    """Change a prompt's title, command or content."""
    owner = current_owner()
    _prompts().get(owner, prompt_id)  # 404 before validating a foreign id's body
    return jsonify(_prompts().update(owner, prompt_id, clean_prompt(body(), partial=True)))


@bp.delete("/api/prompts/<prompt_id>")
def delete_prompt(prompt_id: str):
    """Delete a prompt."""
    _prompts().delete(current_owner(), prompt_id)
    return jsonify({"deleted": True})
