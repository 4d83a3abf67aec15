"""The OpenAPI description: true to the registered routes, and fuzzed with schemathesis (no 5xx).

The fuzz run is bounded: ``EXAMPLES`` generated cases per operation and per mode
(positive: fits the schema; negative: violates it, the bad-input check), no deadline per
case, every request with a 30 s timeout. Streaming operations are fuzzed too: with the
demo model at 1 ms per token every stream ends on its own within a second.
"""

from __future__ import annotations

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.generation.modes import GenerationMode

from odysseus import create_app
from odysseus.openapi import OPERATIONS, build, openapi_path

EXAMPLES = 15
IGNORED = {"HEAD", "OPTIONS"}


def _registered(app):
    return {
        (method, rule.rule)
        for rule in app.url_map.iter_rules()
        if rule.rule.startswith("/api/")
        for method in rule.methods - IGNORED
    }


def test_every_api_route_is_described_and_nothing_else(app):
    described = {(op.method, op.rule) for op in OPERATIONS}
    registered = _registered(app)
    assert registered - described == set(), "routes missing from the odysseus/openapi/ops_*.py tables"
    assert described - registered == set(), "documented routes that do not exist"
    assert len(described) == len(OPERATIONS)  # no operation listed twice


@pytest.mark.slow  # measured 3 s: schemathesis loads every operation
def test_served_document_is_the_built_one_and_loads(client):
    response = client.get("/api/openapi.json")
    assert response.status_code == 200
    doc = response.get_json()
    assert doc == build()
    operations = list(schemathesis.openapi.from_dict(doc).get_all_operations())
    assert len(operations) == len(OPERATIONS)
    assert all(result.ok() for result in operations)
    assert openapi_path("/api/messages/<int:message_id>")[0] == "/api/messages/{message_id}"


def test_public_flags_match_the_server(tmp_path):
    """In password mode without credentials: public operations answer, the others are 401."""
    application = create_app({"DATA_DIR": str(tmp_path), "AUTH": "password", "PROVIDERS": []})
    client = application.test_client()
    try:
        for op in OPERATIONS:
            if op.method != "GET" or "<" in op.rule or op.stream:
                continue
            status = client.get(op.rule).status_code
            assert (status != 401) == op.public, (op.rule, status)
    finally:
        application.extensions["odysseus.runs"].close()


@pytest.fixture(scope="module")
def fuzz_target(tmp_path_factory):
    """A live server in single-user mode with a fast demo model."""
    from liveserver import LiveServer

    server = LiveServer(
        str(tmp_path_factory.mktemp("fuzz")),
        {
            "ODYSSEUS_AUTH": "none",
            "ODYSSEUS_DEMO_TOKEN_DELAY": "0.001",
            "ODYSSEUS_HEARTBEAT_INTERVAL": "0.5",
            # research jobs search a loopback port nobody listens on: they fail fast, never leave the machine
            "ODYSSEUS_WEB_SEARCH_BACKEND": "searxng",
            "ODYSSEUS_SEARXNG_URL": "http://127.0.0.1:9",
        },
    ).start()
    yield server
    server.stop()


def _existing_ids(base: str) -> dict:
    """Real ids for path parameters, so generated bodies reach past the 404 of an unknown id."""
    origin = {"Origin": base}
    with requests.post(
        base + "/api/chat_stream", json={"message": "fuzz me"}, headers=origin, stream=True, timeout=30
    ) as response:
        ids = {"session_id": response.headers["X-Odysseus-Session-Id"], "run_id": response.headers["X-Odysseus-Run-Id"]}
        for _ in response.iter_content(chunk_size=None):
            pass
    messages = requests.get(f"{base}/api/sessions/{ids['session_id']}/messages", timeout=10).json()["messages"]
    ids["message_id"] = messages[0]["id"]
    ids["profile_id"] = requests.post(
        base + "/api/agent/profiles", json={"name": "fuzz"}, headers=origin, timeout=10
    ).json()["id"]
    ids["agent_id"] = requests.post(base + "/api/agents", json={"name": "fuzz"}, headers=origin, timeout=10).json()[
        "agent_id"
    ]
    specialist = requests.post(base + "/api/agents", json={"name": "fuzz two"}, headers=origin, timeout=10).json()[
        "agent_id"
    ]
    ids["workflow_id"] = requests.post(
        base + "/api/alloy/workflows",
        headers=origin,
        timeout=10,
        json={
            "name": "fuzz",
            "members": [
                {"agent_id": ids["agent_id"], "role": "supervisor"},
                {"agent_id": specialist, "role": "specialist"},
            ],
        },
    ).json()["workflow"]["id"]
    ids["job_id"] = requests.post(
        base + "/api/chat/background", json={"message": "fuzz job"}, headers=origin, timeout=10
    ).json()["job_id"]
    ids["doc_id"] = requests.post(
        base + "/api/document",
        json={"title": "fuzz", "content": "a\nb", "session_id": ids["session_id"]},
        headers=origin,
        timeout=10,
    ).json()["id"]
    ids["number"] = 1
    ids["upload_id"] = requests.post(
        base + "/api/upload", files={"files": ("fuzz.txt", b"fuzz text")}, headers=origin, timeout=10
    ).json()["files"][0]["id"]
    ids["memory_id"] = requests.post(
        base + "/api/memory", json={"text": "fuzz memory"}, headers=origin, timeout=10
    ).json()["id"]
    ids["prompt_id"] = requests.post(
        base + "/api/prompts", json={"title": "fuzz", "command": "fuzz", "content": "{{x}}"}, headers=origin, timeout=10
    ).json()["id"]
    ids["folder_id"] = requests.post(base + "/api/folders", json={"name": "fuzz"}, headers=origin, timeout=10).json()[
        "id"
    ]
    ids["share_id"] = requests.post(
        f"{base}/api/sessions/{ids['session_id']}/share", headers=origin, timeout=10
    ).json()["id"]
    ids["token_id"] = "tok_unknown"
    ids["user_id"] = "u_unknown"  # single-user mode has no accounts: the admin routes answer 409
    ids["provider_id"] = "prov_unknown"  # the owner's provider connections: an unknown id, 404
    ids["name"] = "img_" + "A" * 22 + ".png"  # a well-formed image name nobody owns: 404
    return ids


@pytest.mark.slow  # fuzzing (also a live server); the spec-to-routes checks above stay in the fast set
@pytest.mark.timeout(900)  # the suite's longest test (~110 s here): past the global hang limit on a slower box
def test_fuzzing_every_operation_gives_no_server_error(fuzz_target):
    base = fuzz_target.url
    schema = schemathesis.openapi.from_dict(requests.get(base + "/api/openapi.json", timeout=10).json())
    failures = []
    session = requests.Session()
    ids = _existing_ids(base)
    operations = sorted(
        (result.ok() for result in schema.get_all_operations()), key=lambda op: op.method.upper() == "DELETE"
    )  # deletes last: they remove the ids
    plans = []
    for op in operations:
        if op.path.startswith("/api/admin/mcp-servers") and op.method.upper() != "GET":
            # a generated server would make this server run whatever command the fuzzer made up (or connect
            # to its made-up host); tests/test_mcp_admin.py attacks these routes with hostile input instead
            continue
        if op.path.startswith("/api/admin/providers") and op.method.upper() != "GET":
            # the single-user owner manages providers: a generated connection would make this server
            # connect to whatever host the fuzzer made up (tests stay on loopback), and every turn after
            # it fail over to it; test_admin_providers.py attacks these routes with hostile input instead
            continue
        names = [p.name for p in op.path_parameters]
        plans += [(op, GenerationMode.POSITIVE, None), (op, GenerationMode.NEGATIVE, None)]
        if names:
            plans.append((op, GenerationMode.POSITIVE, {name: ids[name] for name in names}))
    plans.sort(key=lambda plan: plan[0].method.upper() == "DELETE" and plan[2] is not None)
    for operation, mode, path_parameters in plans:

        @given(case=operation.as_strategy(generation_mode=mode, path_parameters=path_parameters))
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        def check(case):
            response = case.call(base_url=base, session=session, headers={"Origin": base}, timeout=30)
            if response.status_code >= 500:
                failures.append(
                    f"{mode.value}: {case.method} {case.formatted_path} -> {response.status_code}: "
                    f"{response.text[:200]}"
                )

        try:
            check()
        except Unsatisfiable:  # nothing to violate (no parameters, no body): negative mode has no case
            assert mode is GenerationMode.NEGATIVE and not operation.body and not operation.path_parameters
    session.close()  # no idle keep-alive connection holds the server's graceful stop
    assert failures == [], "\n".join(failures)
    assert requests.get(base + "/api/health", timeout=5).ok
