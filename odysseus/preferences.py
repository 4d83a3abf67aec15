"""Per-user settings: which keys exist, their defaults, validation, and what reaches a turn.

Stored by ``store.user_settings`` (m111_page). The memories part reads ``memory_enabled``;
a turn takes the personal system prompt and default temperature from ``effective`` settings
(``turns/routing.with_owner_defaults``). No Flask here.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from .errors import BadRequest

MAX_SYSTEM_PROMPT = 8000
THEMES = ("auto", "light", "dark")
MODES = ("chat", "agent")


def _text(limit: int) -> Callable[[str, Any], Optional[str]]:
    def check(key: str, value: Any) -> Optional[str]:
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise BadRequest(f"{key} must be a string")
        if len(value) > limit:
            raise BadRequest(f"{key} is longer than {limit} characters")
        if "\x00" in value:
            raise BadRequest(f"{key} must not contain NUL characters")
        return value

    return check


def _choice(options: tuple) -> Callable[[str, Any], Optional[str]]:
    def check(key: str, value: Any) -> Optional[str]:
        if value is None:
            return None
        if value not in options:
            raise BadRequest(f"{key} must be one of {', '.join(options)}")
        return value

    return check


def _temperature(key: str, value: Any) -> Optional[float]:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0.0 <= float(value) <= 2.0):
        raise BadRequest(f"{key} must be a number between 0 and 2, or null")
    return float(value)


def _flag(key: str, value: Any) -> Optional[bool]:
    if value is None:
        return None
    if not isinstance(value, bool):
        raise BadRequest(f"{key} must be true or false")
    return value


#: key -> (default, validator). A validator returns the value to store; None removes the key.
SETTINGS: Dict[str, tuple] = {
    "default_model": (None, _text(200)),
    "default_mode": ("chat", _choice(MODES)),
    "system_prompt": ("", _text(MAX_SYSTEM_PROMPT)),
    "temperature": (None, _temperature),
    "theme": ("auto", _choice(THEMES)),
    "memory_enabled": (True, _flag),
}


def validate(changes: Any) -> Dict[str, Any]:
    """The validated changes of a settings update (unknown keys are refused); raises BadRequest."""
    if not isinstance(changes, dict) or not changes:
        raise BadRequest("send a JSON object with one or more of: " + ", ".join(SETTINGS))
    unknown = sorted(set(changes) - set(SETTINGS))
    if unknown:
        raise BadRequest(f"unknown setting(s): {', '.join(unknown)}")
    return {key: SETTINGS[key][1](key, value) for key, value in changes.items()}


def effective(stored: Dict[str, Any]) -> Dict[str, Any]:
    """Every setting: the stored value, else its default."""
    return {
        key: stored.get(key, default) if stored.get(key) is not None else default
        for key, (default, _) in SETTINGS.items()
    }


def user_settings(store, owner: str) -> Dict[str, Any]:
    """The owner's effective settings.

    ``memory_enabled`` has one home, the memories switch (``store.memories`` settings), so the
    settings screen and the memories screen show and change the same thing.
    """
    settings = effective(store.user_settings.get_all(owner))
    settings["memory_enabled"] = bool(store.memories.settings(owner)["enabled"])
    return settings


def update_settings(store, owner: str, changes: Dict[str, Any]) -> None:
    """Store validated ``changes``; ``memory_enabled`` goes to the memories switch (null: back to on)."""
    changes = dict(changes)
    if "memory_enabled" in changes:
        enabled = changes.pop("memory_enabled")
        store.memories.set_settings(owner, {"enabled": True if enabled is None else bool(enabled)})
    if changes:
        store.user_settings.update(owner, changes)


def memory_enabled(store, owner: str) -> bool:
    """Whether the owner lets the assistant use memories (the memories switch, on by default)."""
    return bool(store.memories.settings(owner)["enabled"])


def user_defaults(store, owner: str) -> Dict[str, Any]:
    """What a turn request takes from the owner's settings when the request itself leaves it out.

    ``{"system_prompt": str or None, "temperature": float or None, "model": str or None,
    "mode": "chat"|"agent", "memory_enabled": bool}``.
    """
    settings = user_settings(store, owner)
    return {
        "system_prompt": settings["system_prompt"] or None,
        "temperature": settings["temperature"],
        "model": settings["default_model"],
        "mode": settings["default_mode"],
        "memory_enabled": settings["memory_enabled"],
    }
