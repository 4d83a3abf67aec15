"""The provider stream readers (odysseus.llm.stream_reader) and the run log's delta fast path.

The readers parse whole raw reads; whatever the split, they must give what the line-by-line
parsers gave (the SSE parser in odysseus.sse is the reference), and the chunked decoder what
http.client decodes. Last, the real OpenAI-compatible adapter reads hostile chunked bodies
from a raw socket server on loopback.
"""

from __future__ import annotations

import http.client
import json
from typing import Iterator, List

import pytest

from odysseus.cancel import CancelToken
from odysseus.config import DEFAULTS
from odysseus.errors import ProviderNetworkError, ProviderProtocolError
from odysseus.llm.base import ChatRequest, ProviderConfig
from odysseus.llm.openai_compat import OpenAICompatProvider
from odysseus.llm.stream_reader import ChunkedDecoder, ndjson_lines, sse_events
from odysseus.runs.run_log import encode_payload
from odysseus.sse import parse_sse
from rawserver import RawServer

SSE_BODY = (
    "retry: 5\n\n"  # no data: no event
    ": a comment\n\n"
    'data: {"a": "é€😀"}\n\n'
    'event: content_block_delta\r\ndata: {"b":1}\r\n\r\n'  # CRLF lines
    "data: first\ndata:second\ndata\n\n"  # multi-line data; no space; a bare field name
    "id: 7\ndata:  two spaces\n: comment inside\n\n"
    "event: ping\n\n"  # a name without data: no event
    "data: [DONE]\n\n"
    "data: cut off mid-event"
).encode()


def _splits(raw: bytes) -> Iterator[List[bytes]]:
    """Every two-piece split, then one byte per read."""
    for cut in range(len(raw) + 1):
        yield [raw[:cut], raw[cut:]]
    yield [raw[i : i + 1] for i in range(len(raw))]


def _reference_sse(chunks: List[bytes]):
    return [(f["event"], f["data"]) for f in parse_sse(chunks) if f.get("data") is not None]


def test_sse_events_match_the_line_parser_at_every_split():
    expected = _reference_sse([SSE_BODY])
    assert expected[0] == ("message", '{"a": "é€😀"}')
    assert ("content_block_delta", '{"b":1}') in expected
    assert ("message", "first\nsecond\n") in expected
    assert ("message", " two spaces") in expected
    assert expected[-1] == ("message", "[DONE]")  # the unfinished last block is dropped
    for chunks in _splits(SSE_BODY):
        assert list(sse_events(chunks)) == expected, chunks


def test_invalid_utf8_split_across_reads_fails_after_the_good_events():
    raw = b"data: ok\n\ndata: bad \xe2\x82\n\ndata: never\n\n"
    for chunks in _splits(raw):
        seen = []
        with pytest.raises(UnicodeDecodeError):
            for event in sse_events(chunks):
                seen.append(event)
        assert seen == [("message", "ok")]


def test_an_unterminated_tail_is_dropped_undecoded():
    assert list(sse_events([b"data: a\n\ndata: \xff"])) == [("message", "a")]


def _reference_ndjson(chunks: List[bytes]) -> List[str]:
    buffer, out = b"", []
    for chunk in chunks:
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        out.extend(line.decode("utf-8") for line in lines if line.strip())
    if buffer.strip():
        out.append(buffer.decode("utf-8"))
    return out


def test_ndjson_lines_at_every_split():
    raw = '{"a":"é😀"}\n\n  \r\n{"b":2}\r\n\t\n{"c":"\u2028"}'.encode()
    expected = _reference_ndjson([raw])
    assert len(expected) == 3 and expected[-1] == '{"c":"\u2028"}'
    for chunks in _splits(raw):
        assert list(ndjson_lines(chunks)) == expected


def _chunked(payload: bytes, size: int) -> bytes:
    out = b""
    for start in range(0, len(payload), size):
        part = payload[start : start + size]
        out += b"%x;ext=1\r\n%s\r\n" % (len(part), part) if start == 0 else b"%X\r\n%s\r\n" % (len(part), part)
    return out + b"0\r\nX-Trailer: yes\r\n\r\n"


@pytest.mark.parametrize("size", [1, 5, 64])
def test_chunked_decoder_at_every_split(size):
    payload = SSE_BODY
    raw = _chunked(payload, size)
    for chunks in _splits(raw):
        decoder = ChunkedDecoder()
        out = b"".join(decoder.feed(c) for c in chunks)
        assert out == payload and decoder.done
        decoder.end_of_input()  # fine after the last chunk


def test_chunked_decoder_refuses_bad_sizes_and_a_short_body():
    with pytest.raises(http.client.IncompleteRead):
        ChunkedDecoder().feed(b"zz\r\nabc\r\n")
    with pytest.raises(http.client.IncompleteRead):
        ChunkedDecoder().feed(b"-5\r\nabc\r\n")
    decoder = ChunkedDecoder()
    assert decoder.feed(b"a\r\nabc") == b"abc"
    with pytest.raises(http.client.IncompleteRead):
        decoder.end_of_input()
    decoder = ChunkedDecoder()
    decoder.feed(b"3\r\nabc\r\n0\r\n")  # the server closed without the final blank line
    decoder.end_of_input()
    assert decoder.done
    with pytest.raises(http.client.LineTooLong):
        ChunkedDecoder().feed(b"1" * 70000)


HOSTILE = [
    "",
    "plain",
    'say "hi"',
    "back\\slash",
    "ctl \x00\x01\x1f\x7f",
    "tab\tnl\ncr\r",
    "lone \ud800 high",
    "lone \udfff low",
    "pair \ud83d\ude00",
    "line \u2028 para \u2029",
    "non-BMP 😀𝄞",
    "é€",
    "</script>",
    "\\u0000",
    "'single'",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_delta_fast_path_is_byte_identical_to_json_dumps(text):
    for data in ({"delta": text}, {"delta": text, "thinking": True}):
        assert encode_payload(data) == json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    other = {"thinking": True, "delta": text}  # another key order takes the general encoder
    assert encode_payload(other) == json.dumps(other, ensure_ascii=False, separators=(",", ":"))
    assert encode_payload({"delta": 5}) == '{"delta":5}'
    assert encode_payload({"delta": text, "thinking": False}) == json.dumps(
        {"delta": text, "thinking": False}, ensure_ascii=False, separators=(",", ":")
    )


# ---------------------------------------------------------------- the adapter over a raw socket server


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def _sse(*payloads) -> bytes:
    return b"".join(b"data: " + (p if isinstance(p, bytes) else json.dumps(p).encode()) + b"\n\n" for p in payloads)


def _provider(port: int) -> OpenAICompatProvider:
    cfg = ProviderConfig(name="raw", kind="openai", base_url=f"http://127.0.0.1:{port}/v1", models=["m"])
    return OpenAICompatProvider(cfg, dict(DEFAULTS))


def _run(provider) -> list:
    return list(provider.stream(ChatRequest(model="m", messages=[{"role": "user", "content": "x"}]), CancelToken()))


REPLY = _sse(
    {"choices": [{"index": 0, "delta": {"content": "<think>mm</think>\n\nHé"}}]},
    {"choices": [{"index": 0, "delta": {"content": "llo 😀"}}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}},
    b"[DONE]",
)


def test_adapter_reads_odd_chunking_and_reuses_the_connection():
    body = _chunked(REPLY, 7)
    # the body cut into pieces at odd places: inside sizes, inside CRLFs, inside a UTF-8 character
    pieces = [HEAD + body[:3]] + [body[i : i + 11] for i in range(3, len(body), 11)]
    server = RawServer([pieces, [HEAD, _chunked(REPLY, 4096)]])
    try:
        provider = _provider(server.port)
        for _ in range(2):
            events = _run(provider)
            text = "".join(e.data["delta"] for e in events if e.type == "delta" and not e.data.get("thinking"))
            thinking = "".join(e.data["delta"] for e in events if e.type == "delta" and e.data.get("thinking"))
            assert (text, thinking) == ("Héllo 😀", "mm")
            assert [e.data for e in events if e.type == "usage"] == [{"data": {"input_tokens": 3, "output_tokens": 2}}]
            assert events[-1].data == {"reason": "stop"}
        assert server.connections == 1  # the fully read body left its connection for the next turn
    finally:
        server.close()


def test_a_provider_closing_mid_event_is_a_network_error():
    body = _chunked(REPLY, 9)
    server = RawServer([[HEAD, body[: len(body) // 2], b""]])
    try:
        with pytest.raises(ProviderNetworkError):
            _run(_provider(server.port))
    finally:
        server.close()


def test_invalid_utf8_from_the_provider_is_a_protocol_error():
    bad = b'data: {"choices":[{"index":0,"delta":{"content":"\xff"}}]}\n\n'
    server = RawServer([[HEAD, _chunked(bad, 5), b""]])
    try:
        with pytest.raises(ProviderProtocolError):
            _run(_provider(server.port))
    finally:
        server.close()
