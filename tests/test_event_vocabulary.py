"""One declared event vocabulary (odysseus/event_vocabulary.py) and everything checked against it.

The projection tables of odysseus/sse.py derive from it and its encoders agree with it; docs/protocol.md's
event tables, the page's handler table (static/js/stream_events.js), the OpenAPI description and the
spec's event names are compared with it both ways, so an event added without documentation, a handler
or a declaration fails here. Removing a row (e.g. ``budget_exceeded``) from docs/protocol.md fails
``test_every_declared_event_is_documented``; adding an undeclared row fails
``test_every_documented_event_is_declared``.
"""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from odysseus import event_vocabulary as vocab
from odysseus import events
from odysseus.events import Event
from odysseus.openapi import build
from odysseus.sse import AGENT_NAMES, CHAT_HIDDEN, agent_frame, chat_frame, research_frame
from vocabulary_docs import event_rows, js_handlers

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTOCOL = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
STREAM_EVENTS_JS = (ROOT / "static" / "js" / "stream_events.js").read_text(encoding="utf-8")
DELEGATION_COMMON = {"delegation_id", "target_agent_id"}  # "every one carries" them, says the text above the table


def _constants():
    return {name: value for name, value in vars(events).items() if name.isupper() and isinstance(value, str)}


def test_every_constant_is_declared_once_and_every_declaration_has_a_constant():
    constants = _constants()
    assert set(constants.values()) == set(vocab.BY_NAME)
    assert len(set(constants.values())) == len(constants)  # no two constants for one name
    for spec in vocab.SPECS:
        assert spec.description and "\n" not in spec.description, spec.name
        assert spec.projections and spec.projections <= set(vocab.PROJECTIONS), spec.name
        assert (vocab.PROVIDER in spec.projections) == (spec.projections == {vocab.PROVIDER}), spec.name


def test_event_groups_of_events_py_agree():
    assert events.PROVIDER_ONLY == vocab.names(vocab.PROVIDER)
    assert set(events.DOC_EVENTS) | set(events.DELEGATION_EVENTS) <= set(vocab.BY_NAME)


def test_no_event_type_literals_in_the_code():
    """Events are made and compared with the declared constants, never with string literals."""
    literal = re.compile(r"""Event\(\s*["']|\.type\s*(?:==|!=)\s*["']|\.type in \(["']""")
    found = []
    for path in (ROOT / "odysseus").rglob("*.py"):
        if path.name == "events.py":  # its docstring shows the wire form
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if literal.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []


def test_sse_projection_tables_derive_from_the_vocabulary():
    assert CHAT_HIDDEN == {spec.name for spec in vocab.SPECS if vocab.CHAT not in spec.projections}
    assert AGENT_NAMES == {
        spec.name: spec.agent_name or spec.name for spec in vocab.SPECS if vocab.AGENT in spec.projections
    }


def _sample(spec):
    data = {name: "x" for name in spec.fields if not name.endswith("?")}
    if spec.name in (events.CHAT_TERMINAL, events.AGENT_TERMINAL):
        data["data"] = {"status": "done", "run_id": "r"}
    if spec.name in (events.RESEARCH_PROGRESS, events.RESEARCH_SOURCES, events.RESEARCH_FINDINGS):
        data["data"] = {"phase": "x"} if spec.name == events.RESEARCH_PROGRESS else []
    return Event(spec.name, data, 7)


@pytest.mark.parametrize("spec", vocab.SPECS, ids=lambda spec: spec.name)
def test_encoders_send_exactly_the_declared_projections(spec):
    event = _sample(spec)
    assert (chat_frame(event) is not None) == (vocab.CHAT in spec.projections)
    agent = agent_frame(event)
    assert (agent is not None) == (vocab.AGENT in spec.projections)
    if agent is not None:
        assert agent.startswith(f"id: 7\nevent: {spec.agent_name or spec.name}\n")
        payload = json.loads(agent.split("data: ", 1)[1])
        declared = spec.agent_fields if spec.agent_fields is not None else spec.fields
        assert set(payload) <= vocab.field_names(declared), spec.name
    assert (research_frame(event) is not None) == (vocab.JOB in spec.projections)


def _documented(text):
    rows = event_rows(text)
    assert len(rows["canonical"]) > 40 and len(rows["agent"]) > 10  # the tables were found
    return rows


def test_every_documented_event_is_declared(text=PROTOCOL):
    rows = _documented(text)
    for row in rows["canonical"]:
        for name in row.names:
            assert name in vocab.BY_NAME, f"docs/protocol.md ({row.table}) names undeclared event {name!r}"
    wire = {name: canonical for canonical, name in AGENT_NAMES.items()}
    for row in rows["agent"]:
        for name in row.names:
            assert name in wire, f"agent projection table names {name!r}, which the agent projection never sends"
        canonical = re.findall(r"`([a-z_]+)`", row.cells[2])
        renamed = {wire[name] for name in row.names if wire[name] != name}
        assert renamed <= set(canonical), row.cells  # chunk from delta, tool_call from tool_start, ...


def test_every_declared_event_is_documented(text=PROTOCOL):
    rows = _documented(text)
    documented = {name for row in rows["canonical"] for name in row.names}
    on_agent_table = {name for row in rows["agent"] for name in row.names}
    # an event only the agent projection carries (run_missing) may be documented by that table alone
    agent_only = {
        spec.name
        for spec in vocab.SPECS
        if spec.projections == {vocab.AGENT} and spec.wire_agent_name in on_agent_table
    }
    missing = sorted(set(vocab.BY_NAME) - documented - agent_only)
    assert missing == [], f"declared events without a row in a docs/protocol.md event table: {missing}"
    missing = sorted(set(AGENT_NAMES.values()) - on_agent_table)
    assert missing == [], f"agent-projection events missing from the agent projection table: {missing}"


def test_documented_fields_are_the_declared_fields(text=PROTOCOL):
    rows = _documented(text)
    checked = 0
    for row in rows["canonical"]:
        if row.fields is None or len(row.names) != 1:
            continue
        spec = vocab.BY_NAME[row.names[0]]
        documented = set(row.fields) | (DELEGATION_COMMON if spec.name in events.DELEGATION_EVENTS else set())
        assert documented == vocab.field_names(spec.fields), (row.table, spec.name)
        checked += 1
    wire = {name: canonical for canonical, name in AGENT_NAMES.items()}
    for row in rows["agent"]:
        if row.fields is None or len(row.names) != 1:
            continue
        spec = vocab.BY_NAME[wire[row.names[0]]]
        declared = spec.agent_fields if spec.agent_fields is not None else spec.fields
        assert set(row.fields) == vocab.field_names(declared), ("agent projection", spec.name)
        checked += 1
    assert checked > 40


def test_page_handles_or_ignores_every_chat_event():
    table = js_handlers(STREAM_EVENTS_JS)
    chat = vocab.names(vocab.CHAT)
    assert sorted(chat - set(table)) == [], "chat events with no line in static/js/stream_events.js"
    assert sorted(set(table) - chat) == [], "static/js/stream_events.js handles events the chat stream never sends"
    assert "ignore" in table.values() and "handler" in table.values()


# The spec's event names and fields (/work/shared/spec: chat-stream-events.md, agent-stream-and-detached-runs.md),
# copied here: the spec is outside the repository.
SPEC_CHAT = {
    "delta": {"delta", "thinking"},
    "model_info": set(),
    "fallback": set(),
    "usage": {"data"},
    "metrics": {"data"},
    "agent_prep": {"data"},
    "agent_step": {"round"},
    "tool_start": {"tool", "command", "full_command", "round"},
    "tool_progress": {"tool", "message", "elapsed", "round"},
    "tool_output": {"tool", "command", "output", "exit_code"},
    "ask_user": {"data"},
    "tool_approval_resolved": {"decision"},
    "generated_image": {"url"},
    "ui_control": {"data"},
    "plan_update": {"data"},
    "rounds_exhausted": {"rounds"},
    "budget_exceeded": {"limit", "used"},
    "loop_breaker_triggered": set(),
    "intent_nudge_exhausted": set(),
    "doc_stream_open": {"title", "language"},
    "doc_stream_delta": {"content"},
    "doc_suggestions": {"doc_id", "suggestions"},
    "doc_update": {"doc_id", "content", "version", "title", "language"},
    "attachments": {"data"},
    "workspace_rejected": {"data"},
    "rag_sources": {"data"},
    "web_sources": {"data"},
    "memories_used": {"data"},
    "compacted": {"context_length"},
    "context_trimmed": set(),
    "research_progress": set(),
    "research_sources": set(),
    "research_findings": set(),
    "research_done": set(),
    "agent_terminal": set(),
    "chat_terminal": set(),
    "message_saved": {"message_id"},
    "error": {"error"},
    "done": set(),
}
SPEC_AGENT = {  # SSE event name -> data fields
    "run_started": {"run_id"},
    "start": {"task_id", "model"},
    "chunk": {"content"},
    "tool_call": {"tool", "arguments"},
    "tool_result": {"tool", "content"},
    "exhibit": {"schema_version", "id", "title", "layout", "elements"},
    "done": {"task_id", "thinking", "total_time_ms", "session_id"},
    "error": {"error"},
    "close": set(),
    "run_missing": set(),
}


@pytest.mark.parametrize("name, fields", sorted(SPEC_CHAT.items()))
def test_spec_chat_events_are_declared_on_the_chat_projection(name, fields):
    spec = vocab.BY_NAME[name]
    assert vocab.CHAT in spec.projections
    assert fields <= vocab.field_names(spec.fields)


@pytest.mark.parametrize("name, fields", sorted(SPEC_AGENT.items()))
def test_spec_agent_events_are_declared_on_the_agent_projection(name, fields):
    canonical = {wire: canonical for canonical, wire in AGENT_NAMES.items()}
    spec = vocab.BY_NAME[canonical[name]]
    declared = spec.agent_fields if spec.agent_fields is not None else spec.fields
    assert fields <= vocab.field_names(declared)


def test_openapi_lists_the_stream_vocabularies():
    schemas = build()["components"]["schemas"]
    assert set(schemas["ChatStreamEventType"]["enum"]) == vocab.names(vocab.CHAT)
    assert set(schemas["AgentStreamEventName"]["enum"]) == set(AGENT_NAMES.values())


def test_removing_a_row_from_the_docs_fails():
    """The checks are live: protocol.md without its budget_exceeded row, with a misspelt row or with a field
    dropped from a row fails them."""
    line = next(line for line in PROTOCOL.splitlines() if line.startswith("| `budget_exceeded` |"))
    with pytest.raises(AssertionError, match="budget_exceeded"):
        test_every_declared_event_is_documented(PROTOCOL.replace(line + "\n", ""))
    with pytest.raises(AssertionError, match="budget_exceded"):
        test_every_documented_event_is_declared(PROTOCOL.replace(line, line + "\n| `budget_exceded` | `limit` | x |"))
    with pytest.raises(AssertionError, match="budget_exceeded"):
        test_documented_fields_are_the_declared_fields(PROTOCOL.replace(line, line.replace(", `requested`", "")))
