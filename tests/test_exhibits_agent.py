"""Exhibits: validation, the internal present_exhibit tool end to end, amendments, auto-captured citations."""

from __future__ import annotations


import pytest
import requests
from searxng import searxng
from scripted_model import ScriptedModel, reply, tool
from sseclient import open_stream, post_chat, types_of

from odysseus.tools.exhibits import citation_exhibit, validate_exhibit
from odysseus.tools.registry import ToolError

MERMAID = {"type": "mermaid", "content": "graph TD; A-->B", "title": "Flow"}
CHOICE = {"type": "choice", "prompt": "Which DB?", "options": ["PostgreSQL", "Neo4j"]}
TABLE = {"type": "table", "columns": ["Model", "Cost"], "rows": [["opus", "0.40"], ["haiku", 0.02]], "caption": "c"}
CITATION = {
    "type": "citation",
    "sources": [
        {"label": "NLLB", "url": "https://example.org/nllb", "quote": "q", "kind": "active"},
        {"label": "Archive"},
    ],
}


def test_valid_exhibit_is_normalised():
    exhibit = validate_exhibit({"id": "exh_1", "title": "All", "elements": [MERMAID, CHOICE, TABLE, CITATION]})
    assert exhibit["schema_version"] == 1 and exhibit["layout"] == "stack" and exhibit["id"] == "exh_1"
    assert [e["type"] for e in exhibit["elements"]] == ["mermaid", "choice", "table", "citation"]
    assert exhibit["elements"][3]["sources"][1]["kind"] == "passive"  # the default
    assert validate_exhibit({"elements": [MERMAID]})["id"].startswith("exh_")


def test_unknown_element_types_pass_through():
    odd = {"type": "hologram", "payload": {"x": 1}}
    assert validate_exhibit({"id": "e", "elements": [odd]})["elements"] == [odd]


@pytest.mark.parametrize(
    "args, fragment",
    [
        ({}, "elements"),
        ({"elements": []}, "elements"),
        ({"elements": [{"content": "x"}]}, "type"),
        ({"elements": [{"type": "mermaid"}]}, "content"),
        ({"elements": [{"type": "choice", "options": []}]}, "options"),
        ({"elements": [{"type": "table", "columns": ["a", "b"], "rows": [["only one"]]}]}, "rows[0]"),
        ({"elements": [{"type": "citation", "sources": [{"label": "x", "kind": "loud"}]}]}, "kind"),
        ({"elements": [{"type": "citation", "sources": [{"label": "x", "url": "javascript:alert(1)"}]}]}, "url"),
        ({"layout": "grid", "elements": [MERMAID]}, "layout"),
        ({"id": "has spaces", "elements": [MERMAID]}, "id"),
    ],
)
def test_invalid_exhibits_name_the_problem(args, fragment):
    with pytest.raises(ToolError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        validate_exhibit(args)


def test_citation_exhibit_dedupes_by_url():
    rows = [
        {"title": "A", "url": "https://a.example/", "snippet": "alpha"},
        {"title": "A again", "url": "https://a.example/"},
        {"title": "B", "url": "https://b.example/"},
        {"title": "bad", "url": "ftp://x"},
    ]
    exhibit = citation_exhibit("call_9", rows)
    assert exhibit["id"] == "exh_src_call_9"
    sources = exhibit["elements"][0]["sources"]
    assert [s["url"] for s in sources] == ["https://a.example/", "https://b.example/"]
    assert all(s["kind"] == "passive" and s["source_type"] == "web" for s in sources)
    assert citation_exhibit("c", []) is None


# ------------------------------------------------------------------ end to end

SEARCH_RESULTS = [
    {"url": "https://ithaca.example/one", "title": "One", "content": "first"},
    {"url": "https://ithaca.example/one", "title": "One (dup)", "content": "again"},
    {"url": "https://ithaca.example/two", "title": "Two", "content": "second"},
]


@pytest.fixture(scope="module")
def searx():
    with searxng(SEARCH_RESULTS) as url:
        yield url


@pytest.fixture(scope="module")
def model():
    with ScriptedModel() as scripted:
        yield scripted


def _server(server_factory, model, searx, **env):
    return server_factory(
        {
            "OPENAI_BASE_URL": model.url + "/v1",
            "OPENAI_API_KEY": "sk-test",
            "ODYSSEUS_AGENT_TOOLS": "web_search,present_exhibit",
            "ODYSSEUS_WEB_SEARCH_BACKEND": "searxng",
            "ODYSSEUS_SEARXNG_URL": searx,
            **env,
        }
    )


def _data(frames, kind):
    return [f["data"] for f in frames if isinstance(f.get("data"), dict) and f["data"].get("type") == kind]


def _messages(server, session_id):
    return requests.get(f"{server.url}/api/sessions/{session_id}/messages", timeout=10).json()["messages"]


def test_exhibit_replaces_the_tool_pair_on_both_projections(server_factory, model, searx):
    server = _server(server_factory, model, searx)
    exhibit = {"id": "exh_db", "title": "Pick", "elements": [CHOICE, TABLE]}
    model.script(reply(tool_calls=[tool("call_e1", "present_exhibit", **exhibit)]), reply("Done."))
    stream = open_stream("POST", server.url + "/api/agent/chat/stream", json={"message": "show me"})
    frames = stream.events()
    names = [f["event"] for f in frames]
    assert "tool_call" not in names and "tool_result" not in names
    shown = [f["data"] for f in frames if f["event"] == "exhibit"]
    assert len(shown) == 1 and shown[0]["id"] == "exh_db" and shown[0]["schema_version"] == 1
    assert names[-2:] == ["done", "close"]
    run_id = stream.headers["X-Odysseus-Run-Id"]
    session_id = stream.headers["X-Odysseus-Session-Id"]
    # the same log on the chat projection: an exhibit frame, no tool rows
    chat = open_stream("GET", f"{server.url}/api/chat/resume/{session_id}").events()
    assert [e["id"] for e in _data(chat, "exhibit")] == ["exh_db"]
    assert "tool_start" not in types_of(chat) and "tool_output" not in types_of(chat)
    saved = _messages(server, session_id)[-1]
    assert saved["metadata"]["exhibits"][0]["id"] == "exh_db" and saved["metadata"]["run_id"] == run_id
    # the model got a tool result paired with its call id
    tool_messages = [m for m in model.requests[-1]["messages"] if m.get("role") == "tool"]
    assert tool_messages[-1]["tool_call_id"] == "call_e1"


def test_invalid_exhibit_goes_back_to_the_model_which_presents_again(server_factory, model, searx):
    server = _server(server_factory, model, searx)
    bad = {"id": "exh_t", "elements": [{"type": "table", "columns": ["a", "b"], "rows": [["x"]]}]}
    good = {"id": "exh_t", "elements": [{"type": "table", "columns": ["a", "b"], "rows": [["x", "y"]]}]}
    model.script(
        reply(tool_calls=[tool("call_bad", "present_exhibit", **bad)]),
        reply(tool_calls=[tool("call_good", "present_exhibit", **good)]),
        reply("Fixed."),
    )
    frames = post_chat(server.url, "table please", mode="agent").events()
    shown = _data(frames, "exhibit")
    assert [e["elements"][0]["rows"] for e in shown] == [[["x", "y"]]]
    error_result = [m for m in model.requests[-2]["messages"] if m.get("tool_call_id") == "call_bad"]
    assert "rows[0]" in error_result[0]["content"]


def test_re_emitting_an_id_amends_it_in_saved_history(server_factory, model, searx):
    server = _server(server_factory, model, searx)
    first = {"id": "exh_plan", "elements": [{"type": "mermaid", "content": "graph TD; A-->B"}]}
    second = {"id": "exh_plan", "elements": [{"type": "mermaid", "content": "graph TD; A-->C"}]}
    model.script(reply(tool_calls=[tool("c1", "present_exhibit", **first)]), reply("v1"))
    stream = post_chat(server.url, "draw", mode="agent")
    session_id = stream.headers["X-Odysseus-Session-Id"]
    stream.events()
    model.script(reply(tool_calls=[tool("c2", "present_exhibit", **second)]), reply("v2"))
    post_chat(server.url, "change it", mode="agent", session=session_id).events()
    replies = [m for m in _messages(server, session_id) if m["role"] == "assistant"]
    assert [r["metadata"]["exhibits"][0]["elements"][0]["content"] for r in replies] == ["graph TD; A-->C"] * 2


@pytest.mark.parametrize("flag, expected", [("true", 1), ("false", 0)])
def test_web_search_citations_are_captured_by_flag(server_factory, model, searx, flag, expected):
    server = _server(server_factory, model, searx, ODYSSEUS_CITATIONS_AUTO_CAPTURE_WEB_SEARCH=flag)
    model.script(reply(tool_calls=[tool("call_ws", "web_search", query="ithaca")]), reply("Found it."))
    frames = post_chat(server.url, "search", mode="agent").events()
    kinds = types_of(frames)
    exhibits = _data(frames, "exhibit")
    assert len(exhibits) == expected
    if expected:
        assert kinds.index("exhibit") == kinds.index("tool_output") + 1  # right after the tool's result
        exhibit = exhibits[0]
        assert exhibit["id"] == "exh_src_call_ws"
        sources = exhibit["elements"][0]["sources"]
        assert [s["url"] for s in sources] == ["https://ithaca.example/one", "https://ithaca.example/two"]
        assert {s["kind"] for s in sources} == {"passive"} and {s["source_type"] for s in sources} == {"web"}
