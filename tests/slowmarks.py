"""Which tests are ``slow``: the rule ``make test-fast`` (``pytest -m "not slow"``) leaves out.

Slow are: every test under tests/browser/ (a real Chromium), every test that starts a real
gunicorn server (it uses the ``live`` / ``server_factory`` fixtures, or a fixture, a test or a
helper they call names ``LiveServer`` or ``serving_model``), and what a module or test marks ``pytest.mark.slow``
itself (fuzzing modules, single tests measured over about a second). ``LiveServer.start`` fails
a test that is not marked, so a new live test cannot slip into the fast set unnoticed.
"""

from __future__ import annotations

import os
import types
from typing import Any, Set

BROWSER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "browser") + os.sep
LIVE_FIXTURES = {"live", "server_factory"}
LIVE_NAMES = {"LiveServer", "serving_model"}  # tests/liveserver.py


def is_slow(item: Any) -> bool:
    """True when ``item`` (a pytest test item) belongs to the slow set."""
    if str(getattr(item, "path", "")).startswith(BROWSER_DIR):
        return True
    if LIVE_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    info = getattr(item, "_fixtureinfo", None)
    for defs in info.name2fixturedefs.values() if info else ():
        if any(_starts_live_server(d.func, set()) for d in defs):
            return True
    return _starts_live_server(getattr(item, "function", None), set())


def _starts_live_server(func: Any, seen: Set[int], depth: int = 3) -> bool:
    """Does ``func`` (or a function of its module it calls, a few levels deep) name one of ``LIVE_NAMES``?"""
    func = getattr(func, "__wrapped__", func)
    code = getattr(func, "__code__", None)
    if code is None or id(code) in seen or depth < 0:
        return False
    seen.add(id(code))
    names = _names(code)
    if LIVE_NAMES & names:
        return True
    module_globals = getattr(func, "__globals__", {})
    for name in names:
        called = module_globals.get(name)
        if isinstance(called, types.FunctionType) and called.__module__ == func.__module__:
            if _starts_live_server(called, seen, depth - 1):
                return True
    return False


def _names(code: types.CodeType) -> Set[str]:
    """Global and attribute names a code object (and the functions nested in it) uses."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names
