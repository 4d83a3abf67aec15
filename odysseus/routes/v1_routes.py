"""The OpenAI-compatible API (``/v1``): a third projection of the run log (``odysseus.openai_api``).

``/v1/models``, ``/v1/responses`` (create, retrieve, resume a stream with ``starting_after``, cancel,
delete) and ``/v1/chat/completions``. Each view parses the request, makes one call to the API's
service or the run engine, and encodes; errors come out in OpenAI's shape (``openai_errors.py``).
"""

from __future__ import annotations

import time
from typing import Any, Dict, Iterator, Optional

from flask import Blueprint, current_app, jsonify, request

from ..errors import InvalidParam, NotFound
from ..openai_api.chat_wire import ChatFold, run_error
from ..openai_api.head import ResponseHead
from ..openai_api.parse import ApiRequest, parse_chat, parse_responses
from ..openai_api.models import model_list
from ..openai_api.responses_wire import ResponseFold, frame
from ..openai_api.stored import chat_fold, head_of, response_object, terminal_sequence
from ..runs.follow import durable_available, follow_memory
from ..runs.run import Run
from ..sse import comment
from .auth import current_owner
from .meta_routes import model_listing
from .openai_errors import error_body
from .params import MAX_CURSOR, body
from .parts import ext
from .streaming import check_stream_slot, sse_response

bp = Blueprint("openai_api", __name__)


def _heartbeat() -> float:
    return float(current_app.config["HEARTBEAT_INTERVAL"])


def _limits() -> tuple:
    return int(current_app.config["MAX_MESSAGE_CHARS"]), int(current_app.config["API_MAX_OUTPUT_TOKENS"])


def _headers(run: Run, session_id: str) -> Dict[str, str]:
    return {"X-Odysseus-Run-Id": run.run_id, "X-Odysseus-Session-Id": session_id}


def _settle(run: Run) -> None:
    """Wait for a run the caller waits on (a non-streamed request) to end."""
    run.settled.wait(float(current_app.config["RUN_WALL_TIMEOUT"]) + 30)


def _row(owner: str, object_id: str) -> dict:
    """The caller's stored response or completion (404 for unknown, another user's, deleted or unstored)."""
    row = ext("store").openai_responses.find(owner, object_id)
    if row is None or not row["stored"]:
        raise NotFound(f"No response found with id '{object_id}'.")
    return row


# ---------------------------------------------------------------------- models
@bp.get("/v1/models")
def list_models():
    """Every id ``model`` accepts: the page's routes and models, the caller's agents and workflows."""
    owner, store = current_owner(), ext("store")
    return jsonify(
        {"object": "list", "data": model_list(model_listing(), store.agents.list(owner), store.workflows.list(owner))}
    )


@bp.get("/v1/models/<path:model_id>")
def get_model(model_id: str):
    """One model of the list (404 when ``model`` would not accept it)."""
    owner, store = current_owner(), ext("store")
    for entry in model_list(model_listing(), store.agents.list(owner), store.workflows.list(owner)):
        if entry["id"] == model_id:
            return jsonify(entry)
    raise NotFound(f"The model '{model_id}' does not exist")


# ---------------------------------------------------------------------- responses
@bp.post("/v1/responses")
def create_response():
    """Start a response: streamed (SSE), in the background (answered at once), or waited for."""
    owner = current_owner()
    req: ApiRequest = parse_responses(body(), *_limits())
    if req.stream:
        check_stream_slot(owner)  # 429 before anything starts
    started, head = ext("openai_api").start(owner, req)
    run = started.run
    assert run is not None  # a /v1 turn has no client_message_id: always a new run
    headers = _headers(run, started.session_id)
    if req.stream:
        stream = follow_memory(ext("runs"), run, run.log.base, ResponseFold(head).feed, _heartbeat())
        return sse_response(stream, headers, retry=False)
    if not req.background:
        _settle(run)
    response = jsonify(response_object(ext("runs"), _row(owner, head.id)) if req.store else _unstored(run, head))
    response.headers.update(headers)
    return response


def _unstored(run: Run, head: ResponseHead) -> dict:
    """The object of a ``store: false`` response (it cannot be read back): folded from its memory log."""
    fold = ResponseFold(head, emit=False)
    for event, payload in run.log.read_after(run.log.base):
        fold.feed(event, payload)
    return fold.snapshot()


def _starting_after() -> int:
    raw = request.args.get("starting_after")
    if raw is None or raw == "":
        return -1
    if not raw.isascii() or not raw.isdigit() or len(raw) > 16 or int(raw) > MAX_CURSOR:
        raise InvalidParam("'starting_after' must be a non-negative integer (a sequence number)", "starting_after")
    return int(raw)


def _flag(name: str) -> bool:
    raw = (request.args.get(name) or "").strip().lower()
    if raw in ("", "false", "0"):
        return False
    if raw in ("true", "1"):
        return True
    raise InvalidParam(f"'{name}' must be true or false", name)


@bp.get("/v1/responses/<response_id>")
def get_response(response_id: str):
    """The response object; with ``stream=true`` its events after ``starting_after``, then live to the end."""
    owner = current_owner()
    stream, after = _flag("stream"), _starting_after()
    row = _row(owner, response_id)
    engine = ext("runs")
    if not stream:
        return jsonify(response_object(engine, row))
    check_stream_slot(owner)
    head = head_of(row)
    headers = {"X-Odysseus-Run-Id": row["run_id"], "X-Odysseus-Session-Id": row["session_id"]}
    fold = ResponseFold(head, after=after)
    run = engine.get(owner, row["run_id"])
    if run is not None and not run.log.released:
        return sse_response(follow_memory(engine, run, run.log.base, fold.feed, _heartbeat()), headers, retry=False)
    if durable_available(row) and row.get("first_seq"):
        body_ = engine.backend.follow(engine, row["run_id"], int(row["first_seq"]) - 1, fold.feed, _heartbeat())
        return sse_response(body_, headers, retry=False)
    return sse_response(_ended_stream(engine, row, head, after), headers, retry=False)


def _ended_stream(engine: Any, row: dict, head: ResponseHead, after: int) -> Iterator[str]:
    """Past the replay window: the terminal event alone, with the whole stored object and its original number."""
    yield comment("connected")
    body_ = response_object(engine, row)
    number = terminal_sequence(engine.store, row)
    if number is None or number <= after:
        return
    kind = {"completed": "response.completed", "incomplete": "response.incomplete", "cancelled": "response.cancelled"}
    yield frame({"type": kind.get(body_["status"], "response.failed"), "response": body_, "sequence_number": number})


def _cancel_run(owner: str, row: dict) -> None:
    """Stop the response's run if it still runs (here or on another worker) and wait until it has ended."""
    if row["status"] != "running":
        return
    engine = ext("runs")
    if engine.get(owner, row["run_id"]) is not None:
        engine.stop_run(owner, row["run_id"], "cancelled")  # waits until the partial is saved
        return
    engine.backend.stop_elsewhere(engine, owner, row["run_id"], "cancelled")
    deadline = time.monotonic() + float(current_app.config["STOP_WAIT"]) + 5
    while time.monotonic() < deadline and ext("store").openai_responses.find(owner, row["id"])["status"] == "running":
        time.sleep(0.05)


@bp.post("/v1/responses/<response_id>/cancel")
def cancel_response(response_id: str):
    """Cancel: the provider is stopped, the partial saved once; idempotent (an ended response answers as it is)."""
    owner = current_owner()
    _cancel_run(owner, _row(owner, response_id))
    return jsonify(response_object(ext("runs"), _row(owner, response_id)))


@bp.delete("/v1/responses/<response_id>")
def delete_response(response_id: str):
    """Cancel if running, then forget the response (its conversation stays in the owner's history)."""
    owner = current_owner()
    _cancel_run(owner, _row(owner, response_id))
    ext("store").openai_responses.delete(owner, response_id)
    return jsonify({"id": response_id, "object": "response", "deleted": True})


# ---------------------------------------------------------------------- chat completions
@bp.post("/v1/chat/completions")
def chat_completions():
    """A chat completion as a run: streamed as ``chat.completion.chunk`` frames, or waited for."""
    owner = current_owner()
    req = parse_chat(body(), *_limits())
    if req.stream:
        check_stream_slot(owner)
    started, head = ext("openai_api").start(owner, req)
    run = started.run
    assert run is not None
    headers = _headers(run, started.session_id)
    engine = ext("runs")
    if req.stream:
        return sse_response(
            follow_memory(engine, run, run.log.base, ChatFold(head).feed, _heartbeat()), headers, retry=False
        )
    _settle(run)
    fold = chat_fold(engine, _row(owner, head.id))
    failure: Optional[dict] = run_error(fold.record or {"status": run.status}) if fold is not None else None
    if fold is None or failure is not None:
        failure = failure or {"message": "the completion's log has expired", "type": "server_error", "code": None}
        status = int(failure.pop("status", 500))
        status = 409 if status == 499 else status  # cancelled while it was waited for
        response = jsonify(error_body(failure["message"], status, code=failure["code"], kind=failure["type"]))
        response.status_code = status
    else:
        response = jsonify(fold.completion())
    response.headers.update(headers)
    return response
