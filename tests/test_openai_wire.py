"""The /v1 projections as pure folds of a run log (odysseus/openai_api/responses_wire.py, chat_wire.py).

A resume after any sequence number gets exactly the rest, numbered the same; the response object is the
same whether folded from the log or rebuilt from the saved reply; each run outcome maps to its status.
"""

from __future__ import annotations

import json
from typing import List, Optional

import pytest

from odysseus import events as ev
from odysseus.events import Event
from odysseus.openai_api.chat_wire import ChatFold
from odysseus.openai_api.head import CHAT_COMPLETION, RESPONSE, ResponseHead, object_id, run_id_of
from odysseus.openai_api.responses_wire import ResponseFold, response_status
from odysseus.openai_api.stored import rebuild, terminal_sequence
from odysseus.openai_api.turn import recorded
from odysseus.runs.run_log import RunLog
from odysseus.sse import parse_sse

HEAD = ResponseHead(id="resp_abc", kind=RESPONSE, created_at=1000.0, model="m", metadata={"k": "v"})


def turn_events() -> List[Event]:
    """What a turn yields: reasoning, text (with characters JSON escapes), a client call, a server tool, an approval."""
    return [
        ev.delta("thinking about it", thinking=True),
        ev.delta('Hello "world"\n'),
        ev.delta("ü 😀 \\ end"),
        Event(ev.FUNCTION_CALL, {"call_id": "c1", "name": "f", "arguments": '{"a":1}'}),
        Event(ev.TOOL_START, {"tool": "shell", "call_id": "t1", "arguments": {"command": "ls"}}),
        Event(ev.TOOL_OUTPUT, {"tool": "shell", "call_id": "t1", "output": "a\nb", "exit_code": 0}),
        ev.delta("more text"),
        Event(ev.TOOL_START, {"tool": "web_search", "call_id": "t2", "arguments": {"query": "x"}}),
        Event(
            ev.ASK_USER,
            {
                "data": {
                    "kind": "tool_approval",
                    "approval_id": "apr_1",
                    "call": {"tool": "shell", "arguments": {"command": "rm"}},
                }
            },
        ),
        ev.delta("tail"),
        ev.usage(5, 9),
    ]


def logged(events: List[Event], record: dict) -> RunLog:
    log = RunLog(10_000, 10**7)
    log.append(Event(ev.RUN_STARTED, {"run_id": "run_abc"}))
    log.append(Event(ev.START, {"task_id": "run_abc"}))
    for event in events:
        log.append(event)
    log.append(Event(ev.MESSAGE_SAVED, {"message_id": 1}))
    log.append(Event(ev.CHAT_TERMINAL, {"data": record}))
    log.append(Event(ev.DONE if record["status"] == "done" else ev.ERROR, {}))
    log.append(Event(ev.CLOSE, {}))
    return log


def frames(log: RunLog, after: int = -1, head: ResponseHead = HEAD) -> List[dict]:
    fold = ResponseFold(head, after=after)
    text = "".join(filter(None, (fold.feed(e, p) for e, p in log.read_after(0))))
    return [json.loads(f["data"]) for f in parse_sse([text.encode()])]


DONE = {"status": "done", "usage": {"input_tokens": 5, "output_tokens": 9}, "timing": {"total_time_ms": 2500}}


def test_a_resume_after_any_sequence_number_gets_exactly_the_rest():
    log = logged(turn_events(), DONE)
    full = frames(log)
    assert [f["sequence_number"] for f in full] == list(range(len(full)))
    assert full[0]["type"] == "response.created" and full[-1]["type"] == "response.completed"
    for after in range(-1, len(full) + 1):
        assert frames(log, after) == full[after + 1 :], after


def test_the_stream_opens_and_closes_items_around_the_text_and_calls():
    types = [f["type"] for f in frames(logged(turn_events(), DONE))]
    assert types[:8] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",  # the reasoning item
        "response.content_part.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ]
    assert types[8:15] == [
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ]
    assert types[15:19] == [
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
    ]
    assert "response.mcp_call.completed" in types and "response.mcp_call.failed" in types  # t2 never finished


def test_the_final_object_holds_every_item_and_the_usage():
    final = frames(logged(turn_events(), DONE))[-1]["response"]
    kinds = [(item["type"], item.get("status")) for item in final["output"]]
    assert kinds == [
        ("reasoning", "completed"),
        ("message", "completed"),
        ("function_call", "completed"),
        ("mcp_call", "completed"),
        ("message", "completed"),
        ("mcp_call", "failed"),
        ("mcp_approval_request", None),
        ("message", "completed"),
    ]
    assert final["output"][1]["content"][0]["text"] == 'Hello "world"\nü 😀 \\ end'
    assert final["output"][6]["id"] == "mcpr_apr_1"
    assert final["usage"] == {
        "input_tokens": 5,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 9,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 14,
    }
    assert final["completed_at"] == 1002.5 and final["metadata"] == {"k": "v"}
    assert len({item["id"] for item in final["output"]}) == 8


@pytest.mark.parametrize(
    "record, status, error, incomplete",
    [
        ({"status": "done"}, "completed", None, None),
        ({"status": "done", "finish_reason": "length"}, "incomplete", None, {"reason": "max_output_tokens"}),
        ({"status": "stopped", "stop_reason": "cancelled"}, "cancelled", None, None),
        ({"status": "stopped", "stop_reason": "replaced"}, "cancelled", None, None),
        (
            {"status": "error", "error": {"message": "Read timeout", "status": 504}},
            "failed",
            {"code": "server_error", "message": "Read timeout"},
            None,
        ),
        (
            {"status": "error", "error": {"message": "slow down", "status": 429}},
            "failed",
            {"code": "rate_limit_exceeded", "message": "slow down"},
            None,
        ),
        (
            {"status": "interrupted"},
            "failed",
            {"code": "server_error", "message": "the server restarted during this run"},
            None,
        ),
    ],
)
def test_each_run_outcome_is_a_response_status(record, status, error, incomplete):
    assert response_status(record) == (status, error, incomplete)
    last = frames(logged([ev.delta("x")], record))[-1]
    expected = {
        "completed": "response.completed",
        "incomplete": "response.incomplete",
        "cancelled": "response.cancelled",
    }
    assert last["type"] == expected.get(status, "response.failed") and last["response"]["status"] == status


def _saved(events: List[Event], record: dict) -> dict:
    """The saved reply a run of ``events`` leaves: content, thinking, and the metadata the turn recorded."""

    class Context:
        metadata: dict = {}

    context = Context()
    context.metadata = {}
    list(recorded(lambda ctx: iter(events), HEAD)(context))  # type: ignore[arg-type]
    content = "".join(e.data["delta"] for e in events if e.type == ev.DELTA and not e.data.get("thinking"))
    thinking = "".join(e.data["delta"] for e in events if e.type == ev.DELTA and e.data.get("thinking"))
    metadata = json.loads(json.dumps({**context.metadata, "status": record["status"], "usage": record.get("usage")}))
    metadata.update(finish_reason=record.get("finish_reason"), total_time_ms=record["timing"]["total_time_ms"])
    metadata["stop_reason"], metadata["error"] = record.get("stop_reason"), record.get("error")
    return {"content": content, "thinking": thinking, "metadata": metadata}


@pytest.mark.parametrize(
    "record",
    [DONE, {"status": "stopped", "stop_reason": "cancelled", "usage": DONE["usage"], "timing": {"total_time_ms": 10}}],
    ids=["completed", "cancelled"],
)
def test_the_object_rebuilt_from_the_saved_reply_is_the_folded_one(record):
    events = turn_events()
    log = logged(events, record)
    folded = ResponseFold(HEAD, emit=False)
    for event, payload in log.read_after(0):
        folded.feed(event, payload)
    saved = _saved(events, record)
    assert rebuild(HEAD, saved) == folded.snapshot()
    last = frames(log)[-1]
    assert terminal_sequence(_Store(saved), {"message_id": 1, "owner": "o"}) == last["sequence_number"]


class _Store:
    """Just enough of the store for ``terminal_sequence``: one saved message."""

    def __init__(self, message: dict):
        self.messages = self
        self.message = message

    def get(self, owner: str, message_id: int) -> dict:
        return self.message


def test_ids_are_derived_from_the_run():
    assert object_id(RESPONSE, "run_Xy-z") == "resp_Xy-z" and run_id_of("resp_Xy-z") == "run_Xy-z"
    assert object_id(CHAT_COMPLETION, "run_Q") == "chatcmpl-Q" and run_id_of("chatcmpl-Q") == "run_Q"
    assert run_id_of("msg_1") is None and run_id_of("resp_") is None


def chat_frames(log: RunLog, include_usage: bool = False) -> List[Optional[str]]:
    head = ResponseHead(
        id="chatcmpl-abc", kind=CHAT_COMPLETION, created_at=1000.9, model="m", include_usage=include_usage
    )
    fold = ChatFold(head)
    text = "".join(filter(None, (fold.feed(e, p) for e, p in log.read_after(0))))
    return [f["data"] for f in parse_sse([text.encode()])]


def test_chat_chunks_end_with_the_finish_reason_usage_and_done():
    data = chat_frames(logged([ev.delta("Hi "), ev.delta("there"), ev.usage(3, 4)], DONE), include_usage=True)
    chunks = [json.loads(d) for d in data[:-1]]
    assert data[-1] == "[DONE]"
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""} and chunks[0]["created"] == 1000
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == "Hi there"
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop" and chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}
    calls = chat_frames(logged([Event(ev.FUNCTION_CALL, {"call_id": "c", "name": "f", "arguments": "{}"})], DONE))
    assert json.loads(calls[-2])["choices"][0]["finish_reason"] == "tool_calls"


def test_a_failed_or_cancelled_chat_stream_ends_with_an_error_frame_not_done():
    failed = chat_frames(logged([ev.delta("x")], {"status": "error", "error": {"message": "boom", "status": 502}}))
    assert json.loads(failed[-1]) == {
        "error": {"message": "boom", "type": "server_error", "param": None, "code": "server_error"}
    }
    cancelled = chat_frames(logged([ev.delta("x")], {"status": "stopped", "stop_reason": "cancelled"}))
    assert json.loads(cancelled[-1])["error"]["code"] == "cancelled" and "[DONE]" not in cancelled


def test_an_mcp_servers_tool_is_named_as_on_its_server():
    events = [
        Event(
            ev.TOOL_START,
            {"tool": "mcp__time__now", "call_id": "t1", "arguments": {}, "mcp": {"server": "time", "tool": "now"}},
        ),
        Event(ev.TOOL_OUTPUT, {"tool": "mcp__time__now", "call_id": "t1", "output": "12:00", "exit_code": 0}),
        Event(
            ev.ASK_USER,
            {
                "data": {
                    "kind": "tool_approval",
                    "approval_id": "apr_2",
                    "call": {"tool": "mcp__time__set", "arguments": {"t": 1}},
                    "mcp": {"server": "time", "tool": "set"},
                }
            },
        ),
    ]
    final = frames(logged(events, DONE))[-1]["response"]
    call, request = final["output"][0], final["output"][1]
    assert (call["type"], call["name"], call["server_label"], call["output"]) == ("mcp_call", "now", "time", "12:00")
    assert (request["type"], request["name"], request["server_label"]) == ("mcp_approval_request", "set", "time")
