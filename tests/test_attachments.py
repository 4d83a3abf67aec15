"""Attachments on a turn: what each provider is sent (text inlined, images in its own format), the
``attachments`` event first on both projections, the budget, refusals before anything is stored."""

from __future__ import annotations

import base64
import io
import json

import pytest
import sample_files as sf
from fakeproviders import FakeProvider, Reply, anthropic_text, ollama_text, openai_text
from liveserver import LiveServer
from sseclient import open_stream, post_chat, types_of

from odysseus import create_app
from odysseus.llm.base import ProviderConfig

KINDS = {"openai": ("/v1", openai_text), "ollama": ("", ollama_text), "anthropic": ("", anthropic_text)}


def make_app(tmp_path, fake, kind="openai", vision=True, **config):
    suffix, _ = KINDS[kind]
    options = {"vision": True} if vision else {}
    return create_app(
        {
            "DATA_DIR": str(tmp_path),
            "AUTH": "none",
            "ATTACH_TEXT_BUDGET": 24_000,
            **config,
            "PROVIDERS": [
                ProviderConfig(
                    name="fake", kind=kind, base_url=fake.url + suffix, models=["m"], default_model="m", options=options
                )
            ],
        }
    )


def upload(client, *files):
    data = {"files": [(io.BytesIO(body), name) for name, body in files]}
    response = client.post("/api/upload", data=data, content_type="multipart/form-data")
    assert response.status_code == 200, response.get_json()
    return [f["id"] for f in response.get_json()["files"]]


def chat_frames(response):
    out = []
    for block in response.get_data().decode().split("\n\n"):
        lines = [line[6:] for line in block.split("\n") if line.startswith("data: ")]
        if lines and lines[0] != "[DONE]":
            data = json.loads(lines[0])
            out.append(data.get("type") or "delta")
    return out, response


@pytest.fixture
def apps(tmp_path, fake):
    made = []

    def build(**kwargs):
        app = make_app(tmp_path / str(len(made)), fake, **kwargs)
        made.append(app)
        return app

    yield build
    for app in made:
        app.extensions["odysseus.runs"].close()


@pytest.mark.parametrize("kind", ["openai", "ollama", "anthropic"])
def test_each_provider_gets_the_text_inlined_and_the_image_in_its_own_format(apps, fake, kind):
    app = apps(kind=kind)
    client = app.test_client()
    text_id, pdf_id, image_id = upload(
        client,
        ("notes.md", b"# Notes\nThe launch code is 7421."),
        ("report.pdf", sf.pdf("Quarterly revenue was 12 million.")),
        ("chart.png", sf.png(4, 3)),
    )
    fake.script(Reply(chunks=KINDS[kind][1]("Seen.")))
    response = client.post(
        "/api/chat_stream", json={"message": "summarise", "attachments": [text_id, pdf_id, image_id], "use_rag": False}
    )
    kinds, _ = chat_frames(response)
    assert kinds[0] == "attachments" and kinds.index("attachments") < kinds.index("delta")
    body = fake.posts[-1].body
    sent = json.dumps(body)
    assert "The launch code is 7421." in sent and "Quarterly revenue was 12 million." in sent
    assert "untrusted" in sent.lower() and "notes.md" in sent and "report.pdf" in sent
    image = base64.b64encode(sf.png(4, 3)).decode()
    if kind == "openai":
        user = body["messages"][-1]
        assert user["content"][0] == {"type": "text", "text": "summarise"}
        assert user["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image}"}}
        assert "parts" not in user
        assert body["messages"][-2]["role"] == "system" and "7421" in body["messages"][-2]["content"]
    elif kind == "ollama":
        user = body["messages"][-1]
        assert user["images"] == [image] and user["content"] == "summarise" and "parts" not in user
    else:
        user = body["messages"][-1]
        assert user["role"] == "user"
        assert {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": image}} in user[
            "content"
        ]
        assert {"type": "text", "text": "summarise"} in user["content"]
        assert "7421" in body["system"]
    session_id = response.headers["X-Odysseus-Session-Id"]
    messages = client.get(f"/api/sessions/{session_id}/messages").get_json()["messages"]
    chips = messages[0]["metadata"]["attachments"]
    assert [c["id"] for c in chips] == [text_id, pdf_id, image_id]
    assert chips[2] == {
        "id": image_id,
        "name": "chart.png",
        "mime": "image/png",
        "size": len(sf.png(4, 3)),
        "width": 4,
        "height": 3,
    }
    assert messages[1]["metadata"]["attachments_used"]["images"] == ["chart.png"]


def test_a_model_without_vision_gets_no_image_and_the_user_a_notice(apps, fake):
    app = apps(vision=False)
    client = app.test_client()
    (image_id,) = upload(client, ("photo.jpg", sf.jpeg()))
    fake.script(Reply(chunks=openai_text("ok")))
    response = client.post("/api/chat_stream", json={"message": "what is this", "attachments": [image_id]})
    data = [json.loads(line[6:]) for line in response.get_data().decode().split("\n") if line.startswith("data: {")]
    notices = [d for d in data if d.get("type") == "notice"]
    assert notices and "does not accept images" in notices[0]["message"] and "photo.jpg" in notices[0]["message"]
    assert data[0]["type"] == "attachments"
    assert fake.posts[-1].body["messages"][-1] == {"role": "user", "content": "what is this"}


def test_vision_models_key_matches_by_glob(apps, fake):
    app = apps(vision=False, VISION_MODELS="fake/m*")
    client = app.test_client()
    (image_id,) = upload(client, ("a.gif", sf.gif()))
    fake.script(Reply(chunks=openai_text("ok")))
    client.post("/api/chat_stream", json={"message": "look", "attachments": [image_id]}).get_data()
    assert fake.posts[-1].body["messages"][-1]["content"][1]["type"] == "image_url"


def test_shared_budget_cuts_one_file_and_names_the_omitted(apps, fake):
    app = apps(ATTACH_TEXT_BUDGET=100)
    client = app.test_client()
    ids = upload(client, ("a.txt", b"A" * 60), ("b.txt", b"B" * 60), ("c.txt", b"C" * 60))
    fake.script(Reply(chunks=openai_text("ok")))
    response = client.post("/api/chat_stream", json={"message": "read", "attachments": ids, "use_rag": "false"})
    text = response.get_data().decode()
    context = fake.posts[-1].body["messages"][-2]["content"]
    assert "A" * 60 in context and "B" * 40 in context and "B" * 41 not in context
    assert "C" * 10 not in context and "omitted (over the attachment budget): c.txt" in context
    assert "Omitted for length" in text and "c.txt" in text
    session_id = response.headers["X-Odysseus-Session-Id"]
    reply = client.get(f"/api/sessions/{session_id}/messages").get_json()["messages"][1]
    assert reply["metadata"]["attachments_used"] == {
        "inlined": ["a.txt", "b.txt"],
        "truncated": ["b.txt"],
        "omitted": ["c.txt"],
    }


@pytest.mark.parametrize(
    "attachments,status,words",
    [
        (["up_doesnotexist0000000000"], 404, "upload not found"),
        (["../../etc/passwd"], 400, "not an upload id"),
        ("not json [", 400, None),
        ([1, 2], 400, "list of upload ids"),
        ({"id": "x"}, 400, "list of upload ids"),
        ([f"up_{i:022d}" for i in range(11)], 400, "too many attachments"),
    ],
)
def test_bad_attachment_lists_are_refused_before_anything_is_stored(apps, fake, attachments, status, words):
    client = apps().test_client()
    response = client.post("/api/chat_stream", json={"message": "hi", "attachments": attachments})
    if isinstance(attachments, str):  # a form-style string that is neither JSON nor ids is read as one id
        assert response.status_code in (400, 404)
    else:
        assert response.status_code == status and words in response.get_json()["error"]
    assert client.get("/api/sessions").get_json()["sessions"] == [] and fake.posts == []


def test_attachments_as_a_form_field(apps, fake):
    client = apps().test_client()
    ids = upload(client, ("a.txt", b"alpha text"), ("b.txt", b"beta text"))
    fake.script(Reply(chunks=openai_text("ok")))
    client.post("/api/chat_stream", data={"message": "hi", "attachments": ",".join(ids)}).get_data()
    assert "alpha text" in json.dumps(fake.posts[-1].body) and "beta text" in json.dumps(fake.posts[-1].body)


# ---------------------------------------------------------------- over a real gunicorn server, both projections


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    model = FakeProvider()
    directory = tmp_path_factory.mktemp("attach")
    config = directory / "odysseus.toml"
    config.write_text(f'''
[[providers]]
name = "fake"
kind = "openai"
base_url = "{model.url}/v1"
models = ["m"]
vision = true
''')
    server = LiveServer(str(directory / "data"), {"ODYSSEUS_CONFIG": str(config)}).start()
    yield server, model
    server.stop()
    model.close()


def live_upload(server, *files):
    import requests

    response = requests.post(server.url + "/api/upload", files=[("files", f) for f in files], timeout=10)
    assert response.status_code == 200, response.text
    return response.json()["files"]


def test_chat_projection_over_the_wire(served):
    server, model = served
    records = live_upload(server, ("spec.txt", b"The widget weighs 3 kg."), ("dot.png", sf.png()))
    model.script(Reply(chunks=openai_text("It ", "weighs 3 kg."), delay=0.02))
    stream = post_chat(server.url, "how heavy?", attachments=[r["id"] for r in records], use_rag=False)
    frames = stream.events()
    kinds = types_of(frames)
    assert kinds[0] == "attachments" and kinds.index("attachments") < kinds.index("delta")
    chips = frames[0]["data"]["data"]
    assert [c["name"] for c in chips] == ["spec.txt", "dot.png"] and chips[1]["width"] == 3
    assert "The widget weighs 3 kg." in json.dumps(model.posts[-1].body)
    assert model.posts[-1].body["messages"][-1]["content"][1]["type"] == "image_url"


def test_agent_projection_over_the_wire(served):
    server, model = served
    records = live_upload(server, ("agent.txt", b"The agent secret is 99 bottles."))
    model.script(Reply(chunks=openai_text("Read ", "it."), delay=0.02))
    stream = open_stream(
        "POST",
        server.url + "/api/agent/chat/stream",
        json={"message": "what is the secret?", "attachments": [records[0]["id"]], "use_rag": False},
    )
    frames = stream.events()
    names = [f["event"] for f in frames]
    assert "attachments" in names and names.index("attachments") < names.index("chunk")
    assert names.index("start") < names.index("attachments")
    event = frames[names.index("attachments")]["data"]
    assert event["data"][0]["name"] == "agent.txt"
    sent = model.posts[-1].body["messages"]
    assert any("99 bottles" in (m.get("content") or "") for m in sent if m["role"] == "system")
    assert sent[-1]["role"] == "user" and sent[-1]["content"] == "what is the secret?"
