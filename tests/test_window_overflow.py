"""A provider that refuses a prompt as too long, stating its real count, gets it once more, fitted with that
count (issue 37, defect 3): the user sees a reply, not an error. In-process against a wire-faithful fake."""

from __future__ import annotations

import json

import pytest
from apphelpers import close_app
from fakeproviders import FakeProvider, Reply, openai_text

from odysseus import create_app
from odysseus.config import load_config
from odysseus.context.turn_window import overflow_count

REFUSAL = "request (1901 tokens) exceeds the available context size (512 tokens)"


def test_the_refusals_of_each_server_are_read():
    assert overflow_count(REFUSAL) == 1901
    openai = "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."
    assert overflow_count(openai) == 9000
    vllm = (
        "This model's maximum context length is 2048 tokens. However, you requested 2100 tokens "
        "(1900 in the messages, 200 in the completion)."
    )
    assert overflow_count(vllm) == 1900
    assert overflow_count("Incorrect API key provided") is None


@pytest.fixture
def fake():
    server = FakeProvider()
    yield server
    server.close()


def test_a_refused_prompt_is_fitted_again_with_the_real_count(tmp_path, fake):
    config_path = tmp_path / "odysseus.toml"
    config_path.write_text(f'''
[[providers]]
name = "llama"
kind = "openai"
base_url = "{fake.url}/v1"
models = [{{name = "digits", context_length = 512}}]
''')
    config = load_config({"ODYSSEUS_CONFIG": str(config_path)})
    app = create_app(
        {
            **config,
            "DATA_DIR": str(tmp_path / "data"),
            "AUTH": "none",
            "REPLY_RESERVE_TOKENS": 64,
            "TITLE_MODE": "first_line",
        }
    )
    try:
        client = app.test_client()
        # an earlier exchange, so there is something to trim when the real count comes back
        fake.script(Reply(chunks=openai_text("First answer. " * 40)))
        first = client.post("/api/chat_stream", json={"message": "tell me " * 60})
        session = first.headers["X-Odysseus-Session-Id"]
        assert first.status_code == 200
        # the run is over before the next replies are scripted (no title request: TITLE_MODE first_line)
        assert "First answer." in first.get_data(as_text=True)
        error = {"error": {"message": REFUSAL, "type": "exceed_context_size_error", "code": 400}}
        fake.script(Reply(status=400, body=error), Reply(chunks=openai_text("Fitted", " now.")))
        answer = client.post("/api/chat_stream", json={"message": "1234567890" * 150, "session": session})
        frames = [
            json.loads(line[6:]) for line in answer.get_data(as_text=True).splitlines() if line.startswith("data: {")
        ]
        text = "".join(f.get("delta", "") for f in frames if "delta" in f and not f.get("thinking"))
        assert text == "Fitted now."
        notices = [f for f in frames if f.get("type") == "notice" and f.get("source") == "window"]
        assert notices and "1901" in notices[0]["message"]
        refused, retried = fake.posts[-2], fake.posts[-1]
        assert len(json.dumps(retried.body["messages"])) < len(json.dumps(refused.body["messages"]))
    finally:
        close_app(app)
