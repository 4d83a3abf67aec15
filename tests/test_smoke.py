"""The app answers a chat turn over a real socket."""

from sseclient import post_chat, text_of, types_of

from odysseus.llm.demo import demo_reply


def test_chat_stream_over_real_socket(live):
    stream = post_chat(live.url, "hello there")
    assert stream.status_code == 200
    assert stream.headers["Content-Type"].startswith("text/event-stream")
    assert stream.headers["X-Odysseus-Run-Id"].startswith("run_")
    frames = stream.events()
    kinds = types_of(frames)
    assert kinds[0] == "model_info"
    assert kinds[-4:] == ["metrics", "message_saved", "chat_terminal", "[DONE]"]
    assert text_of(frames) == demo_reply("hello there")
    ids = [f["id"] for f in frames]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
