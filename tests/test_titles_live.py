"""[issue 40] On the real gevent worker a model title runs at the lowest priority (``after_streams``) and
still arrives: while another chat streams paced tokens, the first chat gets its model title long before
that stream ends, and the stream reads every token."""

from __future__ import annotations

import json
import time

import pytest
import requests
from fakeproviders import FakeProvider, Record, Reply, openai_text
from liveserver import serving_model
from waiting import wait_for

from odysseus.sse import parse_sse

pytestmark = pytest.mark.slow

SLOW_TOKENS = 60  # 60 x 50 ms: a 3 s stream


def _reply_for(record: Record) -> Reply:
    """The title request (its system prompt asks for a title) gets one line; "slow" chats stream paced tokens."""
    messages = (record.body or {}).get("messages") or []
    if messages and "title" in str(messages[0].get("content", "")).lower():
        return Reply(chunks=openai_text("Trip to Rome\n"))
    if "slow" in str(messages[-1].get("content", "")):
        return Reply(chunks=openai_text(*[f"t{i} " for i in range(SLOW_TOKENS)]), delay=0.05)
    return Reply(chunks=openai_text("Rome in May is warm."))


def test_a_model_title_arrives_while_another_chat_streams(tmp_path):
    model = FakeProvider(chooser=_reply_for)
    model.get_json["/v1/models"] = {"object": "list", "data": [{"id": "m1"}]}
    try:
        with serving_model(model.url, str(tmp_path), OPENAI_MODEL="m1", ODYSSEUS_TITLE_MODE="model") as server:
            slow = requests.post(
                server.url + "/api/chat_stream", json={"message": "a slow one"}, stream=True, timeout=30
            )
            assert slow.status_code == 200, slow.text
            lines = slow.iter_lines(decode_unicode=True)
            next(lines)  # the stream has started before the first chat asks
            first = requests.post(server.url + "/api/chat_stream", json={"message": "Plan my holiday"}, timeout=30)
            frames = [json.loads(f["data"]) for f in parse_sse([first.content]) if (f["data"] or "").startswith("{")]
            session_id = next(f["session_id"] for f in frames if isinstance(f, dict) and f.get("session_id"))

            def titled():
                title = requests.get(f"{server.url}/api/sessions/{session_id}", timeout=10).json()["title"]
                return title if title == "Trip to Rome" else None

            started = time.monotonic()
            assert wait_for(titled, timeout=10) == "Trip to Rome"
            waited = time.monotonic() - started
            rest = "\n".join(lines)
            slow.close()
        data = [json.loads(line[5:]) for line in rest.splitlines() if line.startswith("data:") and '"delta"' in line]
        tokens = [frame["delta"] for frame in data]
        assert "".join(tokens) == "".join(f"t{i} " for i in range(SLOW_TOKENS))
        assert waited < SLOW_TOKENS * 0.05, f"the title took {waited:.2f} s: longer than the other stream"
    finally:
        model.close()
