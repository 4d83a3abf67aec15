"""Documents below HTTP: the repository's versions and folds, edits and suggestions, the context,
the preview's throttle, the agent loop with whole tool calls (Ollama-style: no preview), and the
adapters' tool_call_delta fragments."""

from __future__ import annotations

import json

import pytest
from agent_fakes import ScriptedProvider, calls, say
from fakeproviders import Reply, anthropic_block, anthropic_end, anthropic_start, openai_chunk
from provider_helpers import collect, make, of_type, tool_calls

from odysseus.agent.agent_loop import AgentHooks, AgentLoop, initial_state
from odysseus.agent.guards import AgentSettings
from odysseus.cancel import CancelToken
from odysseus.documents.context import BEGIN, END, numbered, with_document
from odysseus.documents.preview import FREE_BYTES, DocumentPreview
from odysseus.documents.service import Documents, normalise_language
from odysseus.documents.tools import ActiveDocument, document_tools
from odysseus.errors import BadRequest, NotFound, PayloadTooLarge
from odysseus.llm.llm_core import Candidate
from odysseus.runs.run import RunContext
from odysseus.store import Store
from odysseus.tools.registry import ToolContext, ToolRegistry


@pytest.fixture
def store(tmp_path):
    return Store(str(tmp_path / "docs.db"))


@pytest.fixture
def docs(store):
    return Documents(
        store.documents, {"DOCUMENT_MAX_BYTES": 64, "DOCUMENT_FOLD_SECONDS": 60.0, "DOCUMENT_PREVIEW_INTERVAL": 0.1}
    )


def session(store, owner="alice"):
    return store.sessions.create(owner, "s")["id"]


# ---------------------------------------------------------------- repository and service
def test_versions_fold_noop_restore_and_active_flag(store, docs):
    sid = session(store)
    first = docs.create("alice", sid, "  A   title ", "PYTHON", "one", source="ai")
    assert first["language"] == "python" and first["title"] == "A title" and first["active"] == 1
    doc, changed = docs.write("alice", first["id"], "one", source="user")
    assert not changed and doc["version_count"] == 1  # unchanged: no version
    doc, changed = docs.write("alice", first["id"], "two", source="user")
    assert changed and doc["version_count"] == 2
    doc, _ = docs.write("alice", first["id"], "two, again", source="user")  # within 60 s of the user's v2: folded
    assert doc["version_count"] == 2 and store.documents.version("alice", first["id"], 2)["content"] == "two, again"
    doc, _ = docs.write("alice", first["id"], "three", source="ai")
    doc, _ = docs.write("alice", first["id"], "four", source="user")  # the latest was the assistant's: no fold
    assert doc["version_count"] == 4
    restored = docs.restore("alice", first["id"], 1)
    assert restored["version_count"] == 5 and restored["content"] == "one"
    versions = store.documents.versions("alice", first["id"])
    assert [v["version"] for v in versions] == [5, 4, 3, 2, 1]
    assert [v["source"] for v in versions] == ["user", "user", "ai", "user", "ai"]
    assert versions[0]["summary"] == "Restored from v1" and versions[0]["size"] == 3
    second = docs.create("alice", sid, "B", None, "", source="ai")
    assert store.documents.active_for_session("alice", sid)["id"] == second["id"]
    docs.write("alice", first["id"], "five", source="ai")  # the assistant writing to A makes A active again
    assert store.documents.active_for_session("alice", sid)["id"] == first["id"]


def test_owner_scoping_limits_and_languages(store, docs):
    doc = docs.create("alice", None, "t", "rust", "x", source="user")
    for call in (
        lambda: store.documents.get("bob", doc["id"]),
        lambda: store.documents.versions("bob", doc["id"]),
        lambda: store.documents.version("bob", doc["id"], 1),
        lambda: store.documents.delete("bob", doc["id"]),
        lambda: docs.write("bob", doc["id"], "y", source="user"),
        lambda: docs.restore("bob", doc["id"], 1),
    ):
        with pytest.raises(NotFound):
            call()
    with pytest.raises(PayloadTooLarge):
        docs.write("alice", doc["id"], "é" * 33, source="user")  # 66 UTF-8 bytes > 64
    with pytest.raises(BadRequest):
        docs.create("alice", None, "   ", None, "x", source="user")
    assert store.documents.get("alice", doc["id"])["version_count"] == 1
    assert normalise_language("Brainfuck") == "text" and normalise_language(None) == "text"
    assert normalise_language(" TypeScript ") == "typescript"


def test_edit_first_match_counts_and_suggestions(store, docs):
    doc = docs.create("alice", None, "t", None, "a b a b", source="user")
    edited, applied, skipped = docs.edit(
        "alice",
        doc["id"],
        [{"find": "a", "replace": "A"}, {"find": "zzz", "replace": "q"}, {"find": "", "replace": "q"}, "junk"],
    )
    assert edited["content"] == "A b a b" and applied == 1 and len(skipped) == 3
    none, applied, _ = docs.edit("alice", doc["id"], [{"find": "nope", "replace": "x"}])
    assert none is None and applied == 0 and store.documents.get("alice", doc["id"])["version_count"] == 2
    kept, skipped = docs.suggestions(
        edited,
        [
            {"find": "b", "replace": "B", "reason": "caps"},
            {"find": "a", "replace": "a", "reason": "no-op"},
            {"find": "missing", "replace": "x", "reason": "?"},
            {"find": "A", "replace": "", "reason": "drop"},
        ],
    )
    assert kept == [
        {"id": "sugg-1", "find": "b", "replace": "B", "reason": "caps"},
        {"id": "sugg-2", "find": "A", "replace": "", "reason": "drop"},
    ]
    assert len(skipped) == 2


# ---------------------------------------------------------------- context
def test_context_is_line_numbered_fenced_and_within_budget():
    doc = {
        "id": "doc_1",
        "title": "T",
        "language": "text",
        "version_count": 3,
        "content": "\n".join(f"line {i}" for i in range(1, 101)),
    }
    text = numbered(doc["content"], 10_000)
    assert text.splitlines()[0] == "  1 | line 1" and text.splitlines()[-1] == "100 | line 100"
    short = numbered(doc["content"], 60)
    assert short.splitlines()[-1] == "[... 96 more lines not shown ...]" and len(short) < 120
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "earlier"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "now"},
    ]
    out = with_document(messages, doc, 10_000)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "system", "user"]
    assert BEGIN in out[3]["content"] and END in out[3]["content"] and "untrusted" in out[3]["content"]
    assert with_document(messages, None, 100) == messages


# ---------------------------------------------------------------- preview
class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_preview_opens_once_title_known_throttles_and_finishes():
    clock = Clock()
    preview = DocumentPreview("create", interval=0.1, max_chars=10_000, clock=clock)
    args = json.dumps({"title": "Notes", "language": "markdown", "content": "x" * 50})
    out = []
    for ch in args:
        clock.now += 0.01  # 10 ms per character: at most one delta per 10 characters
        out += preview.feed(ch)
    out += preview.finish()
    assert out[0].type == "doc_stream_open" and out[0].data == {"title": "Notes", "language": "markdown"}
    deltas = [e.data["content"] for e in out[1:]]
    assert all(e.type == "doc_stream_delta" for e in out[1:])
    assert deltas[-1] == "x" * 50 and all(("x" * 50).startswith(d) for d in deltas)
    assert 3 <= len(deltas) <= 7
    assert preview.finish() == []  # nothing new to show


def test_preview_of_update_uses_the_active_document_and_stops_at_the_limit():
    clock = Clock()
    preview = DocumentPreview(
        "update", interval=0.0, max_chars=10, clock=clock, active=lambda: {"title": "Doc", "language": "go"}
    )
    events = preview.feed('{"content": "12345')
    assert [e.type for e in events] == ["doc_stream_open", "doc_stream_delta"]
    assert events[0].data == {"title": "Doc", "language": "go"}
    assert preview.feed('678901234"}') == [] and preview.finish() == []  # over the limit: no preview of it
    nothing = DocumentPreview("update", interval=0.0, max_chars=10, active=lambda: None)
    assert nothing.feed('{"content": "abc"}') == []


def test_preview_bytes_stay_bounded_for_a_slow_large_document():
    clock = Clock()
    preview = DocumentPreview("create", interval=0.1, max_chars=2_000_000, clock=clock)
    preview.feed('{"title": "big", "content": "')
    total = 0
    for _ in range(4000):  # 1 MB at 250 characters per 0.1 s
        clock.now += 0.1
        total += sum(len(e.data.get("content", "")) for e in preview.feed("y" * 250))
    assert total < FREE_BYTES + 20 * 1_000_000


# ---------------------------------------------------------------- the loop with whole calls
def test_whole_tool_calls_write_without_a_preview_and_metadata_names_the_document(store, docs):
    sid = session(store)
    provider = ScriptedProvider(
        [
            calls(("c1", "create_document", {"title": "Plan", "language": "markdown", "content": "# Plan\n- a"})),
            calls(
                ("c2", "edit_document", {"edits": [{"find": "- a", "replace": "- b"}]}),
                ("c3", "suggest_document", {"suggestions": [{"find": "b", "replace": "c", "reason": "why"}]}),
            ),
            calls(("c4", "update_document", {"content": "x" * 100})),  # over the 64-byte limit
            say("Done."),
        ]
    )
    active = ActiveDocument(docs)
    registry = ToolRegistry(document_tools(docs, active))
    hooks = AgentHooks(
        request_approval=lambda *a: {},
        tool_context=lambda ctx: ToolContext(owner=ctx.owner, session_id=ctx.session_id, cancel=ctx.cancel, config={}),
    )
    settings = AgentSettings(progress_interval=0.1)
    ctx = RunContext("run_t", sid, "alice", CancelToken())
    state = initial_state([{"role": "user", "content": "write"}], settings)
    events = list(AgentLoop([Candidate(provider, "script-1")], registry, settings, hooks, state, ctx).run())
    kinds = [e.type for e in events]
    assert "doc_stream_open" not in kinds and "doc_stream_delta" not in kinds
    updates = [e.data for e in events if e.type == "doc_update"]
    assert [u["version"] for u in updates] == [1, 2] and updates[1]["content"] == "# Plan\n- b"
    suggestions = [e.data for e in events if e.type == "doc_suggestions"]
    assert suggestions == [
        {
            "doc_id": updates[0]["doc_id"],
            "suggestions": [{"id": "sugg-1", "find": "b", "replace": "c", "reason": "why"}],
        }
    ]
    refused = [e.data for e in events if e.type == "tool_output" and e.data["tool"] == "update_document"][0]
    assert refused["exit_code"] == 1 and "limit" in refused["output"]
    assert ctx.metadata["documents"] == [
        {"doc_id": updates[0]["doc_id"], "version": 1, "title": "Plan", "language": "markdown", "action": "create"},
        {"doc_id": updates[0]["doc_id"], "version": 2, "title": "Plan", "language": "markdown", "action": "update"},
        {"doc_id": updates[0]["doc_id"], "action": "suggest", "suggestions": suggestions[0]["suggestions"]},
    ]
    assert store.documents.get("alice", updates[0]["doc_id"])["version_count"] == 2


# ---------------------------------------------------------------- adapters
def test_openai_adapter_passes_argument_fragments_on(fake):
    chunks = [
        openai_chunk({"role": "assistant", "content": ""}),
        openai_chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "create_document", "arguments": ""},
                    }
                ]
            }
        ),
        openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"title": "a\\'}}]}),
        openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'u00e9"}'}}]}),
        openai_chunk({}, "tool_calls"),
        "data: [DONE]\n\n",
    ]
    fake.script(Reply(chunks=chunks))
    events, error = collect(make("openai", fake.url))
    assert error is None
    assert of_type(events, "tool_call_delta") == [
        {"index": 0, "arguments_delta": "", "id": "call_1", "name": "create_document"},
        {"index": 0, "arguments_delta": '{"title": "a\\'},
        {"index": 0, "arguments_delta": 'u00e9"}'},
    ]
    assert tool_calls(events) == [
        {"id": "call_1", "name": "create_document", "arguments": {"title": "a\u00e9"}, "index": 0}
    ]


def test_anthropic_adapter_passes_input_json_fragments_on(fake):
    chunks = (
        anthropic_start()
        + anthropic_block(0, "text", ["Writing."])
        + anthropic_block(1, "tool_use", ['{"con', 'tent": "x"}'], id="toolu_1", name="update_document")
        + anthropic_end("tool_use")
    )
    fake.script(Reply(chunks=chunks))
    events, error = collect(make("anthropic", fake.url))
    assert error is None
    assert of_type(events, "tool_call_delta") == [
        {"index": 0, "arguments_delta": "", "id": "toolu_1", "name": "update_document"},
        {"index": 0, "arguments_delta": '{"con'},
        {"index": 0, "arguments_delta": 'tent": "x"}'},
    ]
    assert tool_calls(events)[0]["arguments"] == {"content": "x"}
