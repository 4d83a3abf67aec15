"""The strict ratchets: the modules checked with every flag of ``mypy --strict`` (setup.cfg) and the
page modules checked with TypeScript's ``strict`` (tsconfig.strict.json) only grow.

``make lint`` runs mypy with setup.cfg and ``scripts/tsc_strict.mjs`` with tsconfig.strict.json; this
keeps both lists honest: they name at least the modules that have been made strict, and setup.cfg's
strict section sets every per-module flag ``--strict`` enables.
"""

from __future__ import annotations

import configparser
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: modules made strict so far (issue 39); add to this list, never remove from it
STRICT = {
    "odysseus.events",
    "odysseus.event_vocabulary",
    "odysseus.sse",
    "odysseus.config",
    "odysseus.config_keys",
    "odysseus.turns",
    "odysseus.turns.start",
    "odysseus.runs",
    "odysseus.runs.engine",
    "odysseus.openai_api",
    "odysseus.openai_api.responses_wire",
}

#: page modules made strict so far (issue 39); add to this list, never remove from it
STRICT_JS = {
    "static/js/sse_reader.js",
    "static/js/stream.js",
    "static/js/stream_events.js",
    "static/js/render.js",
    "static/js/rating_render.js",
}

#: the per-module flags `mypy --strict` turns on (`mypy --help`, mypy 2.x)
STRICT_FLAGS = {
    "disallow_any_generics",
    "disallow_subclassing_any",
    "disallow_untyped_calls",
    "disallow_untyped_defs",
    "disallow_incomplete_defs",
    "check_untyped_defs",
    "disallow_untyped_decorators",
    "warn_return_any",
    "no_implicit_reexport",
    "strict_equality",
    "extra_checks",
}


def strict_sections() -> dict:
    """Each mypy section of setup.cfg that sets every strict flag, by its module patterns."""
    parser = configparser.ConfigParser()
    parser.read(os.path.join(ROOT, "setup.cfg"))
    found = {}
    for name in parser.sections():
        if not name.startswith("mypy-"):
            continue
        flags = {key for key, value in parser[name].items() if value.strip() == "True"}
        if STRICT_FLAGS <= flags:
            found[name] = {pattern.strip() for pattern in name[len("mypy-") :].split(",")}
    return found


def covered(module: str, patterns: set) -> bool:
    """Whether ``module`` is named by a pattern (``pkg.*`` covers the package and its modules)."""
    return any(
        module == pattern or (pattern.endswith(".*") and (module + ".").startswith(pattern[:-1]))
        for pattern in patterns
    )


def test_every_module_made_strict_stays_strict():
    patterns = set().union(*strict_sections().values())
    missing = sorted(module for module in STRICT if not covered(module, patterns))
    assert not missing, f"setup.cfg no longer checks these strictly: {missing}"


def test_the_global_flags_of_strict_are_on():
    parser = configparser.ConfigParser()
    parser.read(os.path.join(ROOT, "setup.cfg"))
    assert parser["mypy"]["warn_unused_ignores"] == "True"
    assert parser["mypy"]["warn_redundant_casts"] == "True"


def test_a_pattern_covers_its_package_only():
    assert covered("odysseus.runs.engine", {"odysseus.runs.*"})
    assert covered("odysseus.runs", {"odysseus.runs.*"})
    assert not covered("odysseus.runsx", {"odysseus.runs.*"})
    assert not covered("odysseus.turns.agent", {"odysseus.runs.*"})


def test_the_page_strict_list_only_grows():
    """tsconfig.strict.json lists every page module made strict, and turns ``strict`` on for them."""
    with open(os.path.join(ROOT, "tsconfig.strict.json"), encoding="utf-8") as fh:
        config = json.load(fh)
    assert config["compilerOptions"]["strict"] is True
    assert STRICT_JS <= set(config["files"]), sorted(STRICT_JS - set(config["files"]))
    for path in config["files"]:
        assert os.path.exists(os.path.join(ROOT, path)), path
