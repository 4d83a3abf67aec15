"""The context pipeline: sources validate before anything is stored, inject untrusted text, announce events."""

import json

import pytest
from fakeproviders import Reply, openai_text

from odysseus import create_app
from odysseus.context import ContextPipeline, ContextRequest, Injection, apply_injections, untrusted_block
from odysseus.errors import BadRequest
from odysseus.events import Event
from odysseus.llm.base import ProviderConfig


class RecordingSource:
    """A source that refuses ``"bad"`` and injects one block with an event."""

    name = "probe"

    def __init__(self, fail=False):
        self.fail = fail
        self.gathered = []

    def check(self, request):
        if request.data.get("probe") == "bad":
            raise BadRequest("probe refused")
        return {"probe": request.data.get("probe")} if request.data.get("probe") else {}

    def gather(self, request):
        self.gathered.append(request)
        if self.fail:
            raise RuntimeError("backend down")
        return [
            Injection(
                "probe",
                event=Event("rag_sources", {"data": [{"filename": "a.txt"}]}),
                text=untrusted_block("probe", "the sky is green"),
                metadata={"probe_used": True},
            )
        ]


@pytest.fixture
def app_with_fake(tmp_path, fake):
    application = create_app(
        {
            "DATA_DIR": str(tmp_path),
            "AUTH": "none",
            "PROVIDERS": [
                ProviderConfig(name="fake", kind="openai", base_url=fake.url + "/v1", models=["m"], default_model="m")
            ],
        }
    )
    yield application
    application.extensions["odysseus.runs"].close()


def frames_of(body: bytes):
    out = []
    for block in body.decode().split("\n\n"):
        data = [line[6:] for line in block.split("\n") if line.startswith("data: ")]
        if data:
            out.append(data[0])
    return out


def test_apply_injections_places_text_before_newest_user_message():
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"},
    ]
    out = apply_injections(messages, [Injection("x", text="T1"), Injection("y", text="T2", parts=[{"type": "image"}])])
    assert [m["role"] for m in out] == ["system", "user", "assistant", "system", "user"]
    assert out[3]["content"] == "T1\n\nT2" and out[4]["parts"] == [{"type": "image"}]
    assert "parts" not in messages[3]  # inputs untouched
    assert apply_injections(messages, []) == messages


def test_failing_source_becomes_a_notice():
    pipeline = ContextPipeline()
    pipeline.add(RecordingSource(fail=True))
    out = pipeline.gather(ContextRequest(owner="o", session_id="s", mode="chat", message="m", data={}))
    assert len(out) == 1 and "unavailable" in out[0].notice and out[0].text == ""


def test_turn_announces_and_injects_and_refusal_stores_nothing(app_with_fake, fake):
    source = RecordingSource()
    app_with_fake.extensions["odysseus.context"].add(source)
    client = app_with_fake.test_client()
    refused = client.post("/api/chat_stream", json={"message": "hello", "probe": "bad"})
    assert refused.status_code == 400 and refused.get_json()["error"] == "probe refused"
    assert client.get("/api/sessions").get_json()["sessions"] == []

    fake.script(Reply(chunks=openai_text("Hi")))
    response = client.post("/api/chat_stream", json={"message": "hello", "probe": "yes"})
    frames = frames_of(response.get_data())
    kinds = [
        json.loads(f).get("type", "delta" if "delta" in f else None) if f != "[DONE]" else "[DONE]" for f in frames
    ]
    assert kinds.index("rag_sources") < kinds.index("delta")
    sent = fake.posts[-1].body["messages"]
    assert sent[-1] == {"role": "user", "content": "hello"}
    assert sent[-2]["role"] == "system" and "the sky is green" in sent[-2]["content"]
    session_id = response.headers["X-Odysseus-Session-Id"]
    messages = client.get(f"/api/sessions/{session_id}/messages").get_json()["messages"]
    assert messages[0]["metadata"]["probe"] == "yes"
    assert messages[1]["metadata"]["probe_used"] is True
