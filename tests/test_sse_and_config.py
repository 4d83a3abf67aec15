"""Pure parts: the chat projection encoder, the SSE parser and configuration layering."""

from __future__ import annotations

import pytest

from odysseus.config import load_config
from odysseus.errors import OdysseusError
from odysseus.events import Event, delta
from odysseus.sse import chat_frame, parse_sse


@pytest.mark.parametrize(
    "event, expected",
    [
        (delta("Hello").numbered(3), 'id: 3\ndata: {"delta":"Hello"}\n\n'),
        (delta("hm", thinking=True).numbered(4), 'id: 4\ndata: {"delta":"hm","thinking":true}\n\n'),
        (
            Event("metrics", {"data": {"total_time": 1.42}}, 5),
            'id: 5\ndata: {"type":"metrics","data":{"total_time":1.42}}\n\n',
        ),
        (Event("done", {"task_id": "x"}, 6), "id: 6\ndata: [DONE]\n\n"),
        (
            Event("error", {"error": "Read timeout", "status": 504}, 7),
            'id: 7\nevent: error\ndata: {"error":"Read timeout","status":504}\n\n',
        ),
        (Event("agent_step", {}, 8), 'id: 8\ndata: {"type":"agent_step"}\n\n'),
    ],
)
def test_chat_frame(event, expected):
    assert chat_frame(event) == expected


@pytest.mark.parametrize("hidden", ["run_started", "close", "tool_call", "finish"])
def test_chat_projection_hides_engine_events(hidden):
    assert chat_frame(Event(hidden, {}, 1)) is None


def test_parse_sse_handles_arbitrary_splits():
    raw = b': hi\n\nid: 1\ndata: {"delta":"a"}\n\nevent: error\ndata: {"error":"x"}\n\n'
    for size in (1, 2, 3, 7, len(raw)):
        chunks = [raw[i : i + size] for i in range(0, len(raw), size)]
        frames = list(parse_sse(chunks))
        assert frames[0]["comment"] == "hi"
        assert frames[1] == {"id": "1", "data": '{"delta":"a"}', "event": "message"}
        assert frames[2]["event"] == "error"


def test_config_layers(tmp_path):
    toml = tmp_path / "odysseus.toml"
    toml.write_text(
        "heartbeat_interval = 3.0\nevict_grace = 7\n"
        '[[providers]]\nname = "local"\nkind = "ollama"\nbase_url = "http://127.0.0.1:11434/"\n'
        '[routes]\ndefault = ["local/llama3", "openai/gpt-4o-mini"]\n'
    )
    env = {
        "ODYSSEUS_CONFIG": str(toml),
        "ODYSSEUS_EVICT_GRACE": "9",
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
    }
    config = load_config(env, overrides={"STOP_WAIT": 1.0})
    assert config["HEARTBEAT_INTERVAL"] == 3.0  # TOML over default
    assert config["EVICT_GRACE"] == 9.0  # env over TOML
    assert config["STOP_WAIT"] == 1.0  # test override over all
    assert [(p.name, p.kind, p.base_url) for p in config["PROVIDERS"]] == [
        ("local", "ollama", "http://127.0.0.1:11434"),
        ("openai", "openai", "http://127.0.0.1:9/v1"),
    ]
    assert config["ROUTES"] == {"default": ["local/llama3", "openai/gpt-4o-mini"]}


def test_config_rejects_bad_env_values():
    with pytest.raises(OdysseusError):
        load_config({"ODYSSEUS_HEARTBEAT_INTERVAL": "soon"})


def test_toml_tables_set_flat_keys(tmp_path):
    toml = tmp_path / "odysseus.toml"
    toml.write_text('[citations]\nauto_capture_web_search = false\n[prices."a/b"]\ninput_per_mtok = 1.0\n')
    config = load_config({"ODYSSEUS_CONFIG": str(toml)})
    assert config["CITATIONS_AUTO_CAPTURE_WEB_SEARCH"] is False
    assert config["TABLES"]["prices"] == {"a/b": {"input_per_mtok": 1.0}}
    assert load_config({})["CITATIONS_AUTO_CAPTURE_WEB_SEARCH"] is True
