"""The OpenAPI 3.1 description of the JSON API, built from one table (served at /api/openapi.json).

Each ``Op`` names a route exactly as Flask registers it (``/api/messages/<int:message_id>``),
so ``tests/test_openapi.py`` can compare the table with ``app.url_map``: a new ``/api/``
route without an entry here fails that test. To document a route, add one ``Op`` line to its area's table
(``ops_runs``, ``ops_content``, ``ops_admin``; shared schemas in ``schemas``)
(body fields as a dict of JSON Schemas; ``stream=True`` for text/event-stream answers).
Bodies allow unknown fields (the server ignores them), matching the server's behaviour.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Tuple

from .. import __version__, event_vocabulary
from .ops_admin import ADMIN_OPERATIONS
from .ops_content import CONTENT_OPERATIONS
from .ops_runs import RUN_OPERATIONS
from .schemas import INT, OBJ, STR, Op

#: Every documented operation (tests/test_openapi.py compares them with the app's url_map).
OPERATIONS: List[Op] = RUN_OPERATIONS + CONTENT_OPERATIONS + ADMIN_OPERATIONS

_CONVERTER = re.compile(r"<(?:(\w+)(?:\([^)]*\))?:)?(\w+)>")
ERROR = {"type": "object", "properties": {"error": STR}, "required": ["error"]}


def openapi_path(rule: str) -> Tuple[str, List[Tuple[str, Dict[str, Any]]]]:
    """``/a/<int:x>`` -> (``/a/{x}``, [("x", integer schema)])."""
    params = [
        (name, INT if conv in ("int", "digits") else {"type": "string", "minLength": 1})
        for conv, name in _CONVERTER.findall(rule)
    ]  # int limits are not described: fuzz past them
    return _CONVERTER.sub(lambda m: "{" + m.group(2) + "}", rule), params


def _operation(op: Op) -> Dict[str, Any]:
    path, path_params = openapi_path(op.rule)
    parameters = [{"name": n, "in": "path", "required": True, "schema": s} for n, s in path_params]
    parameters += [{"name": n, "in": "query", "required": False, "schema": s} for n, s in op.query]
    parameters += [{"name": n, "in": "header", "required": False, "schema": s} for n, s in op.headers]
    content = {"text/event-stream": {"schema": STR}} if op.stream else {"application/json": {"schema": OBJ}}
    doc: Dict[str, Any] = {
        "summary": op.summary,
        "tags": [op.tag],
        "operationId": f"{op.method.lower()}_{path}",
        "responses": {
            str(op.status): {"description": "success", "content": content},
            "4XX": {
                "description": "bad input, not signed in, not found, conflict or rate limited",
                "content": {"application/json": {"schema": ERROR}},
            },
        },
    }
    if op.stream:  # a reconnect at or past a run's last frame (docs/protocol.md, "Cursor and resume")
        doc["responses"]["204"] = {"description": "the run has ended and the cursor has everything: stop"}
    if parameters:
        doc["parameters"] = parameters
    if op.body is not None:
        schema: Dict[str, Any] = {"type": "object", "properties": op.body}
        if op.required:
            schema["required"] = list(op.required)
        doc["requestBody"] = {"required": bool(op.required), "content": {"application/json": {"schema": schema}}}
    if op.public:
        doc["security"] = []
    doc.update(op.extra)
    return doc


def stream_schemas() -> Dict[str, Any]:
    """The stream vocabularies, from odysseus.event_vocabulary (fields of each: docs/protocol.md)."""
    chat = sorted(event_vocabulary.names(event_vocabulary.CHAT))
    agent = sorted(set(event_vocabulary.agent_names().values()))
    return {
        "ChatStreamEventType": {
            "type": "string",
            "enum": chat,
            "description": "`type` of a /api/chat_stream data frame (`delta` frames carry no type; `done` is "
            "`data: [DONE]`, `error` an `event: error` frame)",
        },
        "AgentStreamEventName": {
            "type": "string",
            "enum": agent,
            "description": "SSE event names of /api/agent/chat/stream and its attach",
        },
    }


def build() -> Dict[str, Any]:
    """The whole OpenAPI document."""
    paths: Dict[str, Dict[str, Any]] = {}
    for op in OPERATIONS:
        path, _ = openapi_path(op.rule)
        paths.setdefault(path, {})[op.method.lower()] = _operation(op)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Odysseus JSON API",
            "version": __version__,
            "description": "Streams are Server-Sent Events; see docs/protocol.md for every event. "
            "Writes authorised by the cookie or single-user mode need a same-origin "
            "Origin header or X-Odysseus-CSRF.",
        },
        "components": {
            "schemas": stream_schemas(),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "an ody_... API token"},
                "cookie": {"type": "apiKey", "in": "cookie", "name": "odysseus_session"},
            },
        },
        "security": [{"bearer": []}, {"cookie": []}],
        "paths": paths,
    }
