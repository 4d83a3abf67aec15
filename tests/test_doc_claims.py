"""Claims of docs/guide.md and docs/protocol.md kept true by the code they describe.

Each test reads the sentence or table that makes a claim and compares it with the code: the agent's
tools, the sign-in slow-down, the stop reasons and run statuses, the CSRF meta tag, the plan statuses.
"""

from __future__ import annotations

import pathlib
import re

from odysseus.config import DEFAULTS
from odysseus.store.runs import RUN_STATUSES
from odysseus.throttle import LoginThrottle
from odysseus.tools import build_registry
from odysseus.tools.code import code_tools
from odysseus.tools.exhibits import exhibit_tools
from odysseus.tools.images import image_tools
from odysseus.tools.memory import memory_tools
from odysseus.tools.ui import PLAN_STATUSES, ui_tools
from odysseus.tools.web import web_tools

ROOT = pathlib.Path(__file__).resolve().parent.parent
GUIDE = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
PROTOCOL = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
FRONTEND = (ROOT / "docs" / "frontend.md").read_text(encoding="utf-8")


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end > 0 else len(text)]


def _all_tools():
    config = {**DEFAULTS, "IMAGES_BASE_URL": "http://127.0.0.1:9/v1"}
    return [
        t.name
        for t in web_tools(config)
        + code_tools(config)
        + image_tools(config)
        + ui_tools()
        + exhibit_tools()
        + memory_tools()
    ]


def test_agent_tool_list_is_the_registry():
    """docs/guide.md's list of the agent's tools, AGENT_TOOLS' default and docs/protocol.md's tool table name the
    tools the registry can build, no more and no fewer."""
    tools = _all_tools()
    assert len(tools) == len(set(tools)) >= 9
    assert DEFAULTS["AGENT_TOOLS"].split(",") == tools
    config = {**DEFAULTS, "IMAGES_BASE_URL": "http://127.0.0.1:9/v1"}
    assert build_registry(config).names() == tools
    paragraph = _section(GUIDE, "## Agent mode").split("Tools that run code ask first")[0]
    listed = [name for name in re.findall(r"`([a-z_]+)`", paragraph) if name in tools or "_" in name]
    assert listed == tools, listed
    table = _section(PROTOCOL, "### Tools")
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    documented = [name for row in rows for name in re.findall(r"`([a-z_]+)`", row.split(" | ")[0])]
    assert sorted(documented) == sorted(tools)


def test_sign_in_slow_down_is_as_described():
    sentence = re.search(
        r"the (\d+)th failure for one account \(the (\d+)th for one\s+client address\) locks "
        r"that account/address for (\d+) s,.*?up to (\d+) min",
        GUIDE,
        re.S,
    )
    assert sentence, "docs/guide.md's slow-down sentence changed: update this test with it"
    account, address, first, longest_min = (int(g) for g in sentence.groups())
    assert (account, address) == (DEFAULTS["LOGIN_FREE_FAILURES"], DEFAULTS["LOGIN_FREE_FAILURES_ADDRESS"])
    assert (first, longest_min * 60) == (DEFAULTS["LOGIN_BASE_DELAY"], DEFAULTS["LOGIN_MAX_DELAY"])
    now = [0.0]
    throttle = LoginThrottle.from_config(DEFAULTS)
    throttle.clock = lambda: now[0]
    keys = [("user", "alice"), ("address", "127.0.0.1")]
    for _ in range(account - 1):
        assert throttle.failure(keys) == 0  # the free ones
    delays = [throttle.failure(keys) for _ in range(14)]
    assert delays[:3] == [first, 2 * first, 4 * first] and delays[-1] == longest_min * 60


def _stop_reasons_in_code():
    sources = [
        ROOT / "odysseus/runs" / name
        for name in ("engine.py", "outcome.py", "housekeeping.py", "durable.py", "redis_backend.py")
    ]
    sources += list((ROOT / "odysseus/routes").glob("*.py"))
    text = "\n".join(path.read_text(encoding="utf-8") for path in sources)
    reasons = set(re.findall(r'Outcome\("\w+", "(\w+)"', text))
    reasons |= set(re.findall(r'_end\(run, "(\w+)"\)', text))
    reasons |= set(re.findall(r'stop_run\([^)]*, "(\w+)"\)', text))
    reasons |= set(re.findall(r'stop_elsewhere\([^)]*?, "(\w+)"', text))  # an argument, not an annotation
    reasons |= set(re.findall(r'stop_reason="(\w+)"', text))
    reasons |= {"stopped"}  # the default reason of a stop request (runs/outcome.py cancel_outcome)
    reasons -= {"shutdown"}  # becomes "interrupted"
    return reasons


def test_stop_reason_list_is_the_code():
    sentence = re.search(r"`stop_reason` is\s+null \(done\), (.*?)\.\n", PROTOCOL, re.S).group(1)
    documented = set(re.findall(r"`(\w+)`", re.sub(r"\([^()]*\)", "", sentence)))
    assert documented == _stop_reasons_in_code()


def test_terminal_statuses_are_the_run_statuses():
    sentence = re.search(r"`status` in `chat_terminal.data` is (.*?);", PROTOCOL).group(1)
    assert set(re.findall(r"`(\w+)`", sentence)) == set(RUN_STATUSES) - {"running"}


def test_csrf_meta_name_is_the_page_s():
    named = re.findall(r'<meta name="([^"]+)"', _section(PROTOCOL, "## Accounts, sign-in and tokens"))
    named += re.findall(r'<meta name="([^"]+)">', PROTOCOL)
    page = (ROOT / "templates" / "index.html").read_text(encoding="utf-8")
    api = (ROOT / "static" / "js" / "api.js").read_text(encoding="utf-8")
    assert named and all(f'<meta name="{name}"' in page and f'meta[name="{name}"]' in api for name in named), named


def test_plan_statuses_are_the_tool_s():
    row = next(line for line in PROTOCOL.splitlines() if line.startswith("| `plan_update` |"))
    assert tuple(re.search(r"status: ([a-z_/]+)\}", row).group(1).split("/")) == PLAN_STATUSES
    css = (ROOT / "static" / "css" / "app.css").read_text(encoding="utf-8")
    styled = set(re.findall(r'\.plan-step\[data-status="(\w+)"\]', css))
    assert styled and styled <= set(PLAN_STATUSES)


def test_each_endpoint_has_one_row_in_the_endpoint_tables():
    """Parts that extend an endpoint add their fields to its one row, not a second copy of it."""
    rows = re.findall(r"^\| `((?:GET|POST|PUT|PATCH|DELETE) /[^`]+)` \|", PROTOCOL, flags=re.M)
    assert rows, "protocol.md lists its endpoints in tables"
    assert sorted({r for r in rows if rows.count(r) > 1}) == []


def test_every_page_module_is_named_in_the_page_section():
    section = _section(FRONTEND, "## Modules (`static/js/`)")
    named = set(re.findall(r"`([\w]+\.js)`", section))
    modules = {path.name for path in (ROOT / "static" / "js").glob("*.js")}
    assert modules - named == set(), "page modules docs/frontend.md does not name"
    assert named - modules == set(), "names in docs/frontend.md with no module"


def test_every_module_the_docs_name_exists():
    """A path like `odysseus/turns/start.py` in README.md or docs/ names a file or folder that exists
    (moving a module means updating the docs that send a reader to it)."""
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        named = set(re.findall(r"`(odysseus/[A-Za-z0-9_/]+(?:\.py)?)", doc.read_text(encoding="utf-8")))
        missing = sorted(path for path in named if not (ROOT / path).exists())
        assert not missing, f"{doc.name} names modules that do not exist: {missing}"
