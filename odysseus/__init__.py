"""Odysseus: a self-hosted LLM chat where a response is never lost.

The app is built by the composition root, ``odysseus.composition.create_app``, which lists
every part it wires.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from flask import Flask

__version__ = "0.1.0"


def create_app(test_config: Optional[Mapping[str, Any]] = None) -> Flask:
    """Build the app (see ``odysseus.composition``); imported lazily so ``import odysseus`` stays light."""
    from .composition import create_app as build

    return build(test_config)
