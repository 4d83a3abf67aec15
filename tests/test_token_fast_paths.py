"""The per-token fast paths give exactly what the slow paths give, over hostile bytes.

- ``sse_batches`` (one list per read) flattens to the reference SSE parser's events at every split;
- the OpenAI-compatible adapter over a raw loopback server, its plain-chunk path and in-loop text
  repair on, logs and frames byte-identically to the same adapter with every chunk JSON-parsed and
  repaired by the ``repaired`` generator: NUL and control escapes, lone and split surrogates, CRLF
  lines, multi-byte UTF-8 split across socket reads, chunk boundaries anywhere.
"""

from __future__ import annotations

import http.client
import json
from typing import List

import pytest
from rawserver import RawServer
from test_stream_reader import HEAD, _chunked, _provider, _reference_sse, _splits

from odysseus.cancel import CancelToken
from odysseus.llm import adapter as adapter_module
from odysseus.llm.base import ChatRequest
from odysseus.llm.plain_chunks import PlainContent
from odysseus.llm.stream_reader import sse_batches
from odysseus.llm.text_repair import Repair, repaired
from odysseus.runs.run_log import RunLog
from odysseus.sse import chat_frame

HOSTILE_SSE = (
    'data: {"a":"\u00e9\u20ac\U0001f600"}\r\n\r\n'  # CRLF, multi-byte characters
    "data: nul \x00 inside\n\n"  # a raw NUL in a data line (valid UTF-8)
    "data: a\rb\n\n"  # a lone CR inside a line is part of the value
    "data:\n\n"  # an empty data line is an event with empty data
    "data: data: twice\n\n"
    ":comment\ndata: x\r\r\n\n"
    "data: [DONE]\n\n"
).encode()


def test_sse_batches_flatten_to_the_reference_parser_at_every_split():
    expected = _reference_sse([HOSTILE_SSE])
    assert ("message", "nul \x00 inside") in expected and ("message", "") in expected
    for chunks in _splits(HOSTILE_SSE):
        batches = list(sse_batches(chunks))
        assert all(batches), "no empty batch is yielded"
        assert [event for batch in batches for event in batch] == expected, chunks


PLAIN_SSE = "".join(f'data: {{"n":{i},"t":"\u00e9:{i}"}}\n\n' for i in range(6)).encode() + (
    b"data: \n\ndata: \x00\n\ndata:no-space\n\ndata: crlf\r\n\r\ndata: last\n\n"
)


def test_reads_of_whole_plain_events_take_the_block_path_and_match_the_reference():
    expected = _reference_sse([PLAIN_SSE])
    assert len(expected) == 11 and ("message", "\x00") in expected and ("message", "no-space") in expected
    for chunks in _splits(PLAIN_SSE):
        assert [event for batch in sse_batches(chunks) for event in batch] == expected, chunks
    whole = PLAIN_SSE.split(b"data: \n\n")[0]  # six events, one read: one batch
    assert list(sse_batches([whole])) == [_reference_sse([whole])]


CHUNKED_BODIES = [
    b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
    b"7\r\nab\r\ncd\n\r\n3\r\nxyz\r\n0\r\nTrailer: 1\r\n\r\n",  # a CRLF inside a payload
    b"5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\n\r\n",  # an extension, an upper-case size
    b"5\nhello\r\n 3 \r\nabc\r\n0\r\n\r\n",  # a bare LF after a size, spaces around one
    b"5\r\nhelloXY3\r\nabc\r\n0\r\n\r\n",  # the CRLF after a payload is skipped unchecked
    b"2\r\n\r\n\r\n3\r\n0\r\n\r\n0\r\n\r\n",  # payloads that are a CRLF and a zero line
]


@pytest.mark.parametrize("raw", CHUNKED_BODIES)
def test_whole_chunk_runs_decode_as_the_state_machine_does_at_every_split(monkeypatch, raw):
    from odysseus.llm import stream_reader

    def decode(chunks):
        decoder = stream_reader.ChunkedDecoder()
        try:
            return [decoder.feed(c) for c in chunks], decoder.done, decoder.buffer
        except http.client.HTTPException as exc:
            return type(exc)

    splits = list(_splits(raw)) + [[raw[i : i + 9] for i in range(0, len(raw), 9)]]
    fast = [decode(chunks) for chunks in splits]
    with monkeypatch.context() as patch:
        patch.setattr(stream_reader, "_whole_chunks", lambda buf, out: 0)
        slow = [decode(chunks) for chunks in splits]
    assert fast == slow  # the same bytes from every feed call, the same end state
    for decoded in fast:  # every split of these (valid) bodies decodes to the end
        assert not isinstance(decoded, type) and decoded[1] is True, decoded
    assert (stream_reader._whole_chunks(raw, []) > 0) == (raw is CHUNKED_BODIES[0])  # the common form only


def test_a_bad_read_yields_its_good_events_before_the_error():
    raw = b"data: one\n\ndata: two\n\ndata: \xff\n\ndata: never\n\n"
    seen: List[tuple] = []
    with pytest.raises(UnicodeDecodeError):
        for batch in sse_batches([raw]):
            seen.extend(batch)
    assert seen == [("message", "one"), ("message", "two")]


def _chunk(content: str, extra: str = "") -> bytes:
    """An OpenAI-style token chunk as a server writes it (raw UTF-8, escapes only where JSON needs them)."""
    doc = {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [{"index": 0, "delta": {}}]}
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    body = json.dumps(content, ensure_ascii=False)
    return ("data: " + text.replace('"delta":{}', '"delta":{"content":' + body + "}") + extra + "\r\n\r\n").encode(
        "utf-8", "surrogatepass"
    )


def _hostile_reply() -> bytes:
    parts = [_chunk("Hello")] + [_chunk(f" w{i}\u00e9\u20ac") for i in range(30)]  # plain chunks: the fast path
    parts.append(_chunk("nul\x00 and \x1f bell\x07"))  # escapes: the full parse, then plain again
    parts += [_chunk(" after")] * 3
    parts.append(
        b'data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,'
        b'"delta":{"content":"half \\ud83d"}}]}\n\n'
    )  # a pair split across two chunks
    parts.append(
        b'data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,'
        b'"delta":{"content":"\\ude00 joined, lone \\udc00 here"}}]}\n\n'
    )
    parts.append(
        b'data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,'
        b'"delta":{"content":" dangling \\ud83d"}}]}\n\n'
    )  # a high half held back, then a clean token: the half must not be skipped by the fast path
    parts += [_chunk(" plain next")] * 2
    parts += [_chunk(" \U0001f600 emoji") for _ in range(5)]  # 4-byte UTF-8, split by the reads below
    parts.append(_chunk('quote " and \\ backslash'))
    parts += [_chunk(" tail")] * 2
    parts.append(
        b'data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,'
        b'"delta":{"content":"end \\ud800"}}]}\n\n'
    )  # a high half still held at the finish
    parts.append(b'data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n')
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


def _frames(provider) -> List[str]:
    """The chat frames a run log makes of one streamed reply (what a subscriber is sent)."""
    log = RunLog(max_events=10_000, max_bytes=1 << 24)
    frames = []
    request = ChatRequest(model="m", messages=[{"role": "user", "content": "x"}])
    for event in provider.stream(request, CancelToken()):
        if event.type == "delta":
            frames.append(chat_frame(*log.append(event)))
        else:
            frames.append(repr((event.type, event.data)))
    return frames


class _SlowRepair(Repair):
    """Every event through the reference generator's logic: nothing takes the clean shortcut."""

    def clean(self, event) -> bool:
        return False


@pytest.mark.parametrize("chunk_size, read_size", [(4096, 65536), (7, 5), (1, 3), (333, 1)])
def test_fast_paths_frame_byte_identically_to_the_slow_paths(monkeypatch, chunk_size, read_size):
    body = _chunked(_hostile_reply(), chunk_size)
    pieces = [HEAD] + [body[i : i + read_size] for i in range(0, len(body), read_size)]
    if read_size == 1:  # one byte per send on a long body is slow: every 4-byte character split, in bigger sends
        pieces = [HEAD] + [body[i : i + 2] for i in range(0, len(body), 2)]
    server = RawServer([list(pieces), list(pieces)])
    hits = []
    plain_content = PlainContent.content

    def counted(self, data):
        content = plain_content(self, data)
        hits.append(content is not None)
        return content

    try:
        with monkeypatch.context() as patch:
            patch.setattr(PlainContent, "content", counted)
            fast = _frames(_provider(server.port))
        with monkeypatch.context() as patch:
            patch.setattr(PlainContent, "content", lambda self, data: None)  # every chunk JSON-parsed
            patch.setattr(adapter_module, "Repair", _SlowRepair)
            slow = _frames(_provider(server.port))
    finally:
        server.close()
    assert sum(hits) >= 35  # most token chunks took the no-JSON path
    assert fast == slow
    text = "".join(json.loads(f.split("data: ", 1)[1])["delta"] for f in fast if f.startswith("id: "))
    assert text.startswith("Hello w0\u00e9\u20ac w1")
    assert "nul\x00 and \x1f bell\x07 after after after" in text
    assert "half \U0001f600 joined, lone \ufffd here dangling \ufffd plain next plain next" in text
    assert text.endswith('quote " and \\ backslash tail tailend \ufffd')
    assert [int(f.split("\n", 1)[0][4:]) for f in fast if f.startswith("id: ")] == list(
        range(1, 1 + sum(f.startswith("id: ") for f in fast))
    )
    for frame in fast:
        frame.encode("utf-8")  # no surrogate reaches a frame


def test_repaired_generator_and_in_loop_repair_agree():
    from odysseus.events import Event, delta, finish

    events = [
        delta("a"),
        delta("b\ud83d"),
        delta("\ude00c"),
        delta("x\ud800", thinking=True),
        finish("stop"),
        Event("usage", {"data": {"k\udc00": "v\ud800"}}),
        delta("\ud83d"),
    ]
    repair = Repair()
    in_loop = []
    for event in events:
        in_loop.extend([event] if repair.clean(event) else repair.feed(event))
    in_loop.extend(repair.flush())
    assert in_loop == list(repaired(iter(events)))
    assert [e.data.get("delta") for e in in_loop if e.type == "delta"] == [
        "a",
        "b",
        "\U0001f600c",
        "x",
        "\ufffd",
        "\ufffd",
    ]


def _anthropic_reply() -> bytes:
    def event(name: str, doc: dict) -> bytes:
        return f"event: {name}\ndata: {json.dumps(doc, ensure_ascii=False, separators=(',', ':'))}\n\n".encode(
            "utf-8", "surrogatepass"
        )

    def text(index: int, value: str) -> bytes:
        return event(
            "content_block_delta",
            {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": value}},
        )

    parts = [
        event(
            "message_start",
            {
                "type": "message_start",
                "message": {"id": "m1", "model": "c", "usage": {"input_tokens": 5, "output_tokens": 1}},
            },
        ),
        event(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
    ]
    parts += [text(0, f" w{i}\u00e9") for i in range(20)]  # the plain path
    parts.append(text(0, ""))  # an empty text delta is still a delta
    parts.append(event("ping", {"type": "ping"}))
    parts += [text(0, "nul\x00 esc"), text(0, " after"), text(0, 'q " b \\'), text(0, " \U0001f600")]
    parts.append(
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"half \\ud83d"}}\n\n'
    )
    parts += [text(0, " next")] * 3
    parts.append(b'event: content_block_delta\ndata: {"index":0,"delta":{"type":"text_delta","text":"nameless"}}\n\n')
    parts.append(b'event: other\ndata: {"index":0,"delta":{"type":"text_delta","text":"nameless"}}\n\n')
    parts.append(event("content_block_stop", {"type": "content_block_stop", "index": 0}))
    parts.append(
        event(
            "content_block_start",
            {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        )
    )
    parts += [text(1, " second"), text(0, " back to zero"), text(1, " second")] * 2
    parts.append(
        event(
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 40}},
        )
    )
    parts.append(event("message_stop", {"type": "message_stop"}))
    return b"".join(parts)


def _anthropic(port: int):
    from odysseus.config import DEFAULTS
    from odysseus.llm.anthropic import AnthropicProvider
    from odysseus.llm.base import ProviderConfig

    cfg = ProviderConfig(name="raw", kind="anthropic", base_url=f"http://127.0.0.1:{port}", models=["c"])
    return AnthropicProvider(cfg, dict(DEFAULTS))


@pytest.mark.parametrize("chunk_size, read_size", [(4096, 65536), (5, 7), (1, 2)])
def test_anthropic_text_template_frames_byte_identically_to_the_full_parse(monkeypatch, chunk_size, read_size):
    from odysseus.llm.plain_chunks import FieldTemplate

    body = _chunked(_anthropic_reply(), chunk_size)
    pieces = [HEAD] + [body[i : i + read_size] for i in range(0, len(body), read_size)]
    server = RawServer([list(pieces), list(pieces)])
    hits = []
    template_content = FieldTemplate.content

    def counted(self, data):
        content = template_content(self, data)
        hits.append(content is not None)
        return content

    try:
        with monkeypatch.context() as patch:
            patch.setattr(FieldTemplate, "content", counted)
            fast = _frames(_anthropic(server.port))
        with monkeypatch.context() as patch:
            patch.setattr(FieldTemplate, "content", lambda self, data: None)  # every chunk JSON-parsed
            slow = _frames(_anthropic(server.port))
    finally:
        server.close()
    assert sum(hits) >= 20
    assert fast == slow
    text = "".join(json.loads(f.split("data: ", 1)[1])["delta"] for f in fast if f.startswith("id: "))
    assert "nul\x00 esc after" in text and "half \ufffd next next next" in text
    assert text.count("nameless") == 1  # the event named other is no text delta, whatever its data
    assert text.endswith(" second back to zero second second back to zero second")
