"""Configuration declared once: docs/guide.md's tables, the keys the code reads, unknown ODYSSEUS_* variables."""

from __future__ import annotations

import logging
import pathlib
import re
from dataclasses import replace

import pytest

from odysseus import cli, config_keys
from odysseus.config import DEFAULTS, load_config

ROOT = pathlib.Path(__file__).resolve().parent.parent
GUIDE = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")


def test_guide_tables_are_the_declarations():
    """Refilling docs/guide.md's config-table blocks from odysseus/config_keys.py changes nothing."""
    assert config_keys.render_blocks(GUIDE) == GUIDE, (
        "docs/guide.md's configuration tables differ: run `odysseus config-table --doc docs/guide.md`"
    )


def test_every_section_has_exactly_one_guide_block():
    assert sorted(config_keys.block_sections(GUIDE)) == sorted(config_keys.section_names())


def test_check_fails_when_either_side_changes(monkeypatch):
    """A guide row edited by hand, or a declaration changed without the guide, both fail the check above."""
    edited = GUIDE.replace("| `RAG_TOP_K` | `4` |", "| `RAG_TOP_K` | `5` |")
    assert edited != GUIDE and config_keys.render_blocks(edited) != edited
    dropped = GUIDE.replace(config_keys.config_table("sandbox").splitlines()[3] + "\n", "")
    assert dropped != GUIDE and config_keys.render_blocks(dropped) != dropped
    keys = [replace(k, help="changed") if k.name == "TOOL_TIMEOUT" else k for k in config_keys.KEYS]
    monkeypatch.setattr(config_keys, "KEYS", keys)
    assert config_keys.render_blocks(GUIDE) != GUIDE


def test_defaults_derive_from_declarations():
    assert DEFAULTS == {key.name: key.default for key in config_keys.KEYS}
    for key in config_keys.KEYS:
        assert key.help.strip() and "\n" not in key.help and "|" not in key.help, key.name
        assert key.section in config_keys.SECTIONS, key.name
        assert key.default == "" or isinstance(key.default, key.kind), key.name


# config.get("KEY", ...), config["KEY"], app.config.get("KEY") and Timeouts.pick(..., "KEY", ...)
READ = re.compile(r"""(?:config|cfg|settings_config|app_config)(?:\.get\(|\[)\s*["']([A-Z][A-Z0-9_]+)["']""")
NOT_KEYS = {
    "PROVIDERS",
    "ROUTES",
    "TABLES",
    "MCP_SERVERS",
    "MAX_CONTENT_LENGTH",
    "TESTING",
    "SECRET_KEY_FALLBACKS",
}  # built by load_config / Flask's own


def test_every_key_the_code_reads_is_declared():
    read = set()
    for path in (ROOT / "odysseus").rglob("*.py"):
        read |= set(READ.findall(path.read_text(encoding="utf-8")))
    read |= set(re.findall(r'pick\("[a-z_]+", "([A-Z_]+)"', (ROOT / "odysseus/llm/http.py").read_text()))
    assert len(read) > 100  # the pattern does find the reads
    undeclared = sorted(read - set(config_keys.BY_NAME) - NOT_KEYS)
    assert undeclared == [], f"declare these in odysseus/config_keys.py: {undeclared}"


def test_every_odysseus_variable_named_in_the_repo_is_known():
    """ODYSSEUS_* names used by gunicorn.conf.py, the Makefile, the code and the docs are keys or process variables."""
    known = {"ODYSSEUS_" + name for name in config_keys.BY_NAME}
    known |= {"ODYSSEUS_" + v.name for v in config_keys.PROCESS_VARIABLES}
    files = [ROOT / "gunicorn.conf.py", ROOT / "Makefile", ROOT / "wsgi.py", ROOT / "README.md"]
    files += list((ROOT / "odysseus").rglob("*.py")) + list((ROOT / "docs").glob("*.md"))
    named = set()
    for path in files:
        named |= set(re.findall(r"ODYSSEUS_[A-Z][A-Z0-9_]*[A-Z0-9]", path.read_text(encoding="utf-8")))
    named -= {"ODYSSEUS_LOGIN"}  # the guide's "ODYSSEUS_LOGIN_*" family
    assert sorted(named - known) == []


def test_unknown_variable_is_warned_with_the_closest_key(caplog):
    caplog.set_level(logging.WARNING, logger="odysseus.config")
    config = load_config(env={"ODYSSEUS_HEARTBEAT_INTERVL": "5", "ODYSSEUS_ZZQQ": "1"})
    messages = [r.getMessage() for r in caplog.records if r.name == "odysseus.config"]
    assert any("ODYSSEUS_HEARTBEAT_INTERVL" in m and "ODYSSEUS_HEARTBEAT_INTERVAL" in m for m in messages), messages
    assert any("ODYSSEUS_ZZQQ" in m and "did you mean" not in m for m in messages), messages
    assert config["HEARTBEAT_INTERVAL"] == 10.0  # the misspelt one set nothing that is read


def test_known_and_process_variables_are_not_warned(caplog, tmp_path):
    caplog.set_level(logging.WARNING, logger="odysseus.config")
    toml = tmp_path / "o.toml"
    toml.write_text("heartbeat_interval = 3\n")
    env = {
        "ODYSSEUS_HEARTBEAT_INTERVAL": "5",
        "ODYSSEUS_CONFIG": str(toml),
        "ODYSSEUS_WORKERS": "1",
        "ODYSSEUS_LOG_LEVEL": "debug",
        "ODYSSEUS_GRACEFUL_MARGIN": "2",
        "ODYSSEUS_ACCESS_LOG": "-",
        "ODYSSEUS_WORKER_TIMEOUT": "9",
        "ODYSSEUS_WORKER_CONNECTIONS": "5",
        "ODYSSEUS_SESSION_COOKIE_SECURE": "1",
        "OPENAI_API_KEY": "x",
        "HOME": "/",
    }
    config = load_config(env=env)
    assert [r.getMessage() for r in caplog.records if r.name == "odysseus.config"] == []
    assert config["HEARTBEAT_INTERVAL"] == 5.0 and config["SESSION_COOKIE_SECURE"] is True


def test_unknown_toml_keys_are_warned_with_the_closest_key(caplog, tmp_path):
    caplog.set_level(logging.WARNING, logger="odysseus.config")
    toml = tmp_path / "typo.toml"
    toml.write_text(
        "heartbeat_intervl = 3\nzzqq_toml = 1\n[citations]\nnot_a_citation_key = 1\n"
        '[prices."a/b"]\ninput = 1\n[routes]\nfast = ["a/b"]\n'
    )
    config = load_config(env={"ODYSSEUS_CONFIG": str(toml)})
    messages = [r.getMessage() for r in caplog.records if r.name == "odysseus.config"]
    assert any("heartbeat_intervl" in m and "heartbeat_interval" in m for m in messages), messages
    assert any("zzqq_toml" in m and "did you mean" not in m for m in messages), messages
    assert any("citations.not_a_citation_key" in m for m in messages), messages
    assert not any("prices" in m or "routes" in m or "fast" in m for m in messages), messages
    assert config["HEARTBEAT_INTERVAL"] == 10.0 and config["ROUTES"] == {"fast": ["a/b"]}


def test_each_warning_is_said_once_per_process(caplog):
    """gunicorn's master reads the configuration several times and forks its workers from itself:
    each process (with what it inherited) says a given thing once, not once per read or per worker."""
    caplog.set_level(logging.WARNING, logger="odysseus.config")
    env = {"ODYSSEUS_ONCE_ONLY_TYPO": "1"}
    for _ in range(3):
        load_config(env=env)
    messages = [r.getMessage() for r in caplog.records if "ODYSSEUS_ONCE_ONLY_TYPO" in r.getMessage()]
    assert len(messages) == 1, messages


def test_start_up_warns_about_unknown_variable(monkeypatch, caplog, tmp_path):
    """create_app (what wsgi.py runs at start-up) logs the warning from the real environment."""
    from apphelpers import close_app
    from odysseus import create_app

    monkeypatch.setenv("ODYSSEUS_MAX_STREAM_PER_USER", "3")
    caplog.set_level(logging.WARNING, logger="odysseus.config")
    application = create_app({"DATA_DIR": str(tmp_path), "AUTH": "none"})
    try:
        messages = [r.getMessage() for r in caplog.records if r.name == "odysseus.config"]
        assert any("ODYSSEUS_MAX_STREAM_PER_USER" in m and "ODYSSEUS_MAX_STREAMS_PER_USER" in m for m in messages)
    finally:
        close_app(application)


def test_cli_prints_a_section(capsys):
    assert cli.main(["config-table", "agent"]) == 0
    assert capsys.readouterr().out == config_keys.config_table("agent")
    assert cli.main(["config-table", "no-such"]) == 2
    assert cli.main(["config-table"]) == 0
    out = capsys.readouterr().out
    assert config_keys.render_blocks(out) == out and config_keys.block_sections(out) == config_keys.section_names()


def test_cli_refills_a_readme(tmp_path):
    stale = tmp_path / "README.md"
    stale.write_text("intro\n<!-- config-table: alloy -->\n| old |\n<!-- /config-table -->\ntail\n")
    assert cli.main(["config-table", "--doc", str(stale)]) == 0
    assert (
        stale.read_text()
        == "intro\n<!-- config-table: alloy -->\n"
        + config_keys.config_table("alloy")
        + "<!-- /config-table -->\ntail\n"
    )


@pytest.mark.parametrize("name", ["ODYSSEUS_", "ODYSSEUS_ \u00e9\u0000x", "odysseus_auth"])
def test_odd_variable_names_do_not_break_loading(name, caplog):
    load_config(env={name: "1"})
