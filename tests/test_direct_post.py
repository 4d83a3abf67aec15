"""The provider HTTP client (llm/http.py, direct_post.py, body_stream.py; issues 22 and 39) against raw
loopback servers that send what a library server will not: odd heads, interim responses, every body
framing, compression, TLS, hostile sizes, stalls and stops. Every failure must leave as one of our
ProviderErrors (or Cancelled), and a request must never reach the model twice."""

from __future__ import annotations

import gzip
import json
import socket
import textwrap
import threading
import time
import zlib

import pytest

from childscript import run_json
from odysseus.cancel import Cancelled, CancelToken
from odysseus.config import DEFAULTS
from odysseus.errors import (
    ProviderError,
    ProviderHTTPError,
    ProviderNetworkError,
    ProviderTimeout,
    ProviderUnavailable,
)
from odysseus.llm.base import ChatRequest, ProviderConfig
from odysseus.llm.direct_post import SocketPool
from odysseus.llm.http import ProviderStream, Timeouts, Transport
from odysseus.llm.response_head import parse_head
from odysseus.llm.openai_compat import OpenAICompatProvider
from rawserver import RawServer
from tlscert import self_signed, server_context
from waiting import wait_for

ENV_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "requests_ca_bundle", "curl_ca_bundle")
ENV_VARS += tuple(name.upper() for name in ENV_VARS)
TIMEOUTS = Timeouts(connect=5, first_token=5, idle=5)
BODY = {"model": "m", "messages": [{"role": "user", "content": "hé 😀"}], "stream": True}
PAYLOAD = b'data: {"choices":[{"index":0,"delta":{"content":"h\xc3\xa9"}}]}\n\ndata: [DONE]\n\n'
CHUNKED = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


def chunked(data: bytes, size: int = 7) -> bytes:
    """``data`` as HTTP chunks of ``size`` bytes, with the last chunk."""
    parts = [data[i : i + size] for i in range(0, len(data), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


def with_length(data: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\n%sContent-Length: %d\r\n\r\n%s" % (extra, len(data), data)


def read(transport: Transport, url: str, cancel: CancelToken = None) -> bytes:
    """The body of one POST, read to its end (its connection then goes back to the pool)."""
    stream = transport.open(url, BODY, cancel or CancelToken())
    try:
        data = b"".join(stream.chunks())
        stream.finish()
        return data
    finally:
        stream.close()


def url_of(server: RawServer, scheme: str = "http") -> str:
    return f"{scheme}://127.0.0.1:{server.port}/v1/chat/completions"


def test_a_request_is_one_write_and_its_connection_serves_the_next():
    answer = [CHUNKED, chunked(PAYLOAD)]
    server = RawServer([answer, answer, answer])
    transport = Transport("t", TIMEOUTS, {"Authorization": "Bearer k"})
    try:
        stream = transport.open(url_of(server), BODY, CancelToken())
        assert isinstance(stream, ProviderStream)
        stream.close()  # not read to its end: closed, not pooled
        assert read(transport, url_of(server)) == PAYLOAD
        assert read(transport, url_of(server)) == PAYLOAD
        assert server.connections == 2  # the unread one was closed; the read one is kept alive
        for head, body, first in server.requests:
            assert json.loads(body) == BODY
            assert first == head + b"\r\n\r\n" + body  # head and body came in the first read: one write
            lines = head.split(b"\r\n")
            assert lines[:2] == [b"POST /v1/chat/completions HTTP/1.1", b"Host: 127.0.0.1:%d" % server.port]
            assert b"Authorization: Bearer k" in lines and b"Content-Length: %d" % len(body) in lines
    finally:
        transport.close()
        server.close()


FRAMINGS = {
    # name: (the response's pieces, connections two requests take)
    "content-length": ([with_length(PAYLOAD)], 1),
    "content-length in pieces": ([with_length(PAYLOAD)[:40], 0.01, with_length(PAYLOAD)[40:]], 1),
    "head one byte at a time": ([bytes([b]) for b in with_length(PAYLOAD)], 1),
    "bare LF head": ([b"HTTP/1.1 200 OK\nContent-Length: %d\n\n%s" % (len(PAYLOAD), PAYLOAD)], 1),
    "until close": ([b"HTTP/1.1 200 OK\r\n\r\n", PAYLOAD, b""], 2),
    "HTTP/1.0": ([b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(PAYLOAD), PAYLOAD)], 2),
    "connection close": ([with_length(PAYLOAD, b"Connection: close\r\n"), b""], 2),
    "interim 100 and 103 first": (
        [b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early\r\nLink: x\r\n\r\n" + with_length(PAYLOAD)],
        1,
    ),
    "gzip chunked": ([CHUNKED[:-2] + b"Content-Encoding: gzip\r\n\r\n", chunked(gzip.compress(PAYLOAD), 5)], 1),
    "raw deflate": ([with_length(zlib.compress(PAYLOAD)[2:-4], b"Content-Encoding: deflate\r\n")], 1),
    "zlib deflate": ([with_length(zlib.compress(PAYLOAD), b"Content-Encoding: deflate\r\n")], 1),
    "folded header": (
        [b"HTTP/1.1 200 OK\r\nX-Long: a\r\n b\r\nContent-Length: %d\r\n\r\n%s" % (len(PAYLOAD), PAYLOAD)],
        1,
    ),
}


@pytest.mark.parametrize("name", list(FRAMINGS))
def test_every_body_framing_reads_the_exact_bytes(name):
    pieces, connections = FRAMINGS[name]
    server = RawServer([pieces, pieces])
    transport = Transport("t", TIMEOUTS)
    try:
        assert read(transport, url_of(server)) == PAYLOAD
        assert read(transport, url_of(server)) == PAYLOAD
        assert server.connections == connections
        assert len(server.requests) == 2
    finally:
        transport.close()
        server.close()


def _provider(port: int) -> OpenAICompatProvider:
    cfg = ProviderConfig(name="raw", kind="openai", base_url=f"http://127.0.0.1:{port}/v1", models=["m"])
    return OpenAICompatProvider(cfg, dict(DEFAULTS))


def _stream(provider: OpenAICompatProvider) -> list:
    return list(provider.stream(ChatRequest(model="m", messages=[{"role": "user", "content": "x"}]), CancelToken()))


HOSTILE = {
    "not HTTP": [b"HELLO WORLD\r\n\r\n", b""],
    "four-digit status": [b"HTTP/1.1 2000 OK\r\n\r\n", b""],
    "HTTP/2 status line": [b"HTTP/2 200\r\n\r\n", b""],
    "a head that never ends": [b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70_000, b""],
    "nothing, then close": [b""],
    "negative length": [b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n", b""],
    "length not a number": [b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n", b""],
    "unknown encoding": [b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 4\r\n\r\nabcd"],
    "shorter than its length": [b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\ndata: {}", b""],
    "bad gzip": [b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 9\r\n\r\nnot gzip!"],
    "chunk size not hex": [CHUNKED + b"zz\r\nabc\r\n", b""],
    "cut inside a chunk": [CHUNKED + b"ff\r\ndata: ", b""],
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_response_is_a_provider_error_and_is_not_sent_twice(name):
    server = RawServer([HOSTILE[name], [with_length(PAYLOAD)]])
    try:
        with pytest.raises(ProviderError):
            _stream(_provider(server.port))
        assert len(server.requests) == 1  # a fresh connection's failure is the provider's: no retry
    finally:
        server.close()


def test_an_error_status_keeps_its_message_and_retry_after_without_the_key():
    key = "sk-secret-abcdef123456"
    body = json.dumps({"error": {"message": f"slow down, {key}"}}).encode()
    head = b"HTTP/1.1 429 Too Many\r\nRetry-After: 7\r\nContent-Length: %d\r\n\r\n" % len(body)
    server = RawServer([[head + body]])
    transport = Transport("t", TIMEOUTS, {"Authorization": f"Bearer {key}"})
    try:
        with pytest.raises(ProviderHTTPError) as info:
            transport.open(url_of(server), BODY, CancelToken())
        assert (info.value.status, info.value.retry_after) == (429, 7.0)
        assert "slow down" in info.value.message and key not in info.value.message
    finally:
        transport.close()
        server.close()


def test_a_307_redirect_is_followed_with_the_same_body():
    to = b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /v1/elsewhere\r\nContent-Length: 0\r\n\r\n"
    server = RawServer([[to], [with_length(PAYLOAD)]])
    transport = Transport("t", TIMEOUTS)
    try:
        assert read(transport, url_of(server)) == PAYLOAD
        assert [r[0].split(b"\r\n")[0] for r in server.requests] == [
            b"POST /v1/chat/completions HTTP/1.1",
            b"POST /v1/elsewhere HTTP/1.1",
        ]
        assert server.requests[0][1] == server.requests[1][1]
    finally:
        transport.close()
        server.close()


def nothing_reached(server: RawServer) -> bool:
    """True when no connection reached ``server`` before this call: a probe connected now is the first it
    accepts (its accept loop takes connections in the order they were made) and its request the first
    recorded. Waits for the probe's request, so an earlier connection cannot still be on its way."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as probe:
        probe.sendall(b"POST /probe HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
        wait_for(lambda: server.requests, what="the probe's request to reach the server")
        probe.recv(65536)  # its answer: the server is done with the probe before it closes
    return server.connections == 1 and [r[0].split(b"\r\n")[0] for r in server.requests] == [b"POST /probe HTTP/1.1"]


@pytest.mark.parametrize(
    "headers", [{"X-Note": "a\r\nX-Injected: 1"}, {"X-Note": " padded"}, {"Bad Name": "1"}, {"X-Key": "ключ"}]
)
def test_a_header_that_cannot_be_sent_as_written_is_refused_before_anything_is_sent(headers):
    server = RawServer([[with_length(PAYLOAD)]])
    transport = Transport("t", TIMEOUTS, headers)
    try:
        with pytest.raises(ProviderNetworkError, match="Invalid header for provider t"):
            transport.open(url_of(server), BODY, CancelToken())
        assert nothing_reached(server)  # no request and no connection before the probe
    finally:
        transport.close()
        server.close()


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/v1", "http:///v1/chat", "http://127.0.0.1:port/v1", "v1/chat"])
def test_a_url_that_cannot_be_sent_is_a_provider_error(url):
    with pytest.raises(ProviderNetworkError, match="Invalid URL for provider t"):
        Transport("t", TIMEOUTS).open(url, BODY, CancelToken())


def test_a_url_is_sent_quoted_with_its_query():
    server = RawServer([[with_length(PAYLOAD)]])
    transport = Transport("t", TIMEOUTS)
    try:
        assert read(transport, f"http://127.0.0.1:{server.port}/v1/a b/ü?x=1 2&y=%41") == PAYLOAD
        assert server.requests[0][0].split(b"\r\n")[0] == b"POST /v1/a%20b/%C3%BC?x=1%202&y=%41 HTTP/1.1"
    finally:
        transport.close()
        server.close()


def test_a_stop_while_waiting_for_the_head_ends_the_request_at_once():
    server = RawServer([[30.0]])  # reads the request, then says nothing
    transport = Transport("t", TIMEOUTS)
    token = CancelToken()
    threading.Timer(0.2, lambda: token.cancel("stopped")).start()
    began = time.monotonic()
    try:
        with pytest.raises(Cancelled):
            transport.open(url_of(server), BODY, token)
        assert time.monotonic() - began < 3
        assert len(server.requests) == 1
    finally:
        transport.close()
        server.close()


def test_a_stop_before_the_request_sends_nothing():
    server = RawServer([[with_length(PAYLOAD)]])
    transport = Transport("t", TIMEOUTS)
    token = CancelToken()
    token.cancel("stopped")
    try:
        with pytest.raises(Cancelled):
            transport.open(url_of(server), BODY, token)
        assert nothing_reached(server)
    finally:
        transport.close()
        server.close()


def test_a_model_that_never_answers_times_out_and_a_closed_port_is_unavailable():
    server = RawServer([[30.0]])
    transport = Transport("t", Timeouts(connect=5, first_token=0.3, idle=5))
    began = time.monotonic()
    try:
        with pytest.raises(ProviderTimeout):
            transport.open(url_of(server), BODY, CancelToken())
        assert time.monotonic() - began < 3
    finally:
        transport.close()
        server.close()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ProviderUnavailable):
        Transport("t", TIMEOUTS).open(f"http://127.0.0.1:{port}/v1/chat/completions", BODY, CancelToken())


def test_a_pooled_connection_the_server_closed_is_dropped_before_use():
    server = RawServer([[with_length(PAYLOAD), b""], [with_length(PAYLOAD)]])  # closes after the first answer
    transport = Transport("t", TIMEOUTS)
    try:
        assert read(transport, url_of(server)) == PAYLOAD
        time.sleep(0.1)
        assert read(transport, url_of(server)) == PAYLOAD
        assert server.connections == 2 and len(server.requests) == 2
    finally:
        transport.close()
        server.close()


def test_the_pool_keeps_at_most_its_size_and_never_a_closed_socket():
    pool = SocketPool(2)
    pairs = [socket.socketpair() for _ in range(4)]
    try:
        for mine, _theirs in pairs[:3]:
            pool.give("k", mine)
        assert pairs[2][0].fileno() == -1  # over the size: closed
        pairs[1][1].close()  # the newest kept socket's peer goes away
        assert pool.take("k") is pairs[0][0]  # the closed one was skipped (and closed)
        assert pairs[1][0].fileno() == -1
        assert pool.take("k") is None
        pool.close()
        pool.give("k", pairs[3][0])
        assert pairs[3][0].fileno() == -1  # a closed pool keeps nothing
    finally:
        for mine, theirs in pairs:
            mine.close()
            theirs.close()


def test_parse_head_joins_repeated_headers_and_ignores_case():
    head = parse_head(b"HTTP/1.1 200 Fine\r\nSet-Cookie: a=1\r\nset-cookie: b=2\r\nX-Y:  z \r\n\r\n")
    assert (head.status, head.reason, head.version) == (200, "Fine", 11)
    assert head.headers.get("SET-COOKIE") == "a=1, b=2" and head.headers["x-y"] == "z" and "X-Y" in head.headers


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 (openssl), and its key."""
    return self_signed(tmp_path_factory.mktemp("tls"))


def test_https_trusts_the_ca_bundle_read_at_start_and_nothing_else(monkeypatch, certificate):
    cert, key = certificate
    answer = [CHUNKED, chunked(PAYLOAD)]
    server = RawServer([answer, answer], tls=server_context(cert, key))
    try:
        with pytest.raises(ProviderNetworkError):  # certifi's bundle does not know this certificate
            Transport("t", TIMEOUTS).open(url_of(server, "https"), BODY, CancelToken())
        assert server.requests == []
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert))
        transport = Transport("t", TIMEOUTS)
        try:
            assert read(transport, url_of(server, "https")) == PAYLOAD
            assert read(transport, url_of(server, "https")) == PAYLOAD
            assert server.connections == 2  # the refused handshake, then one kept-alive connection
        finally:
            transport.close()
    finally:
        server.close()


GEVENT_SCRIPT = textwrap.dedent(r"""
    from gevent import monkey
    monkey.patch_all()

    import json, sys, time
    from odysseus.cancel import CancelToken
    from odysseus.errors import ProviderTimeout
    from odysseus.llm.http import ProviderStream, Timeouts, Transport
    from odysseus.llm.http_errors import provider_errors

    port = int(sys.argv[1])
    transport = Transport("t", Timeouts(connect=5, first_token=5, idle=0.5))
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    out = {}
    stream = transport.open(url, {"x": 1}, CancelToken())
    out["direct"] = isinstance(stream, ProviderStream)
    pieces = []
    for data in stream.chunks():  # paced: each read drains the socket, the next one waits for readability
        stream.mark_output()
        pieces.append(data.decode())
    stream.finish()
    stream.close()
    out["paced"] = "".join(pieces)
    stream = transport.open(url, {"x": 2}, CancelToken())
    last, got = time.monotonic(), []
    try:
        with provider_errors("t"):
            for data in stream.chunks():
                stream.mark_output()
                last = time.monotonic()
                got.append(data.decode())
        out["stall"] = "no timeout"
    except ProviderTimeout:
        out["stall"] = round(time.monotonic() - last, 1)  # the idle timeout counts from the last bytes
    out["before_stall"] = "".join(got)
    stream.close()
    print(json.dumps(out))
""")


def test_under_gevent_paced_reads_wait_for_the_socket_and_keep_the_idle_timeout():
    tokens = [b"tok%d " % i for i in range(20)]
    paced = [CHUNKED]
    for token in tokens:
        paced += [0.01, b"%x\r\n%s\r\n" % (len(token), token)]
    paced.append(b"0\r\n\r\n")
    # chunks 0.3 s apart (each wait restarts the stream's idle timer: 0.9 s in all would pass a timer
    # that was not restarted), then nothing: the idle timeout (0.5 s) ends it, counted from the last chunk
    stalled = [CHUNKED, b"4\r\nfirs\r\n", 0.3, b"4\r\nsecd\r\n", 0.3, b"4\r\nthrd\r\n", 30.0]
    server = RawServer([paced, stalled])
    try:
        out = run_json(GEVENT_SCRIPT, server.port)
    finally:
        server.close()
    assert out["direct"] is True
    assert out["paced"] == b"".join(tokens).decode()
    assert out["before_stall"] == "firssecdthrd", out
    assert isinstance(out["stall"], float) and 0.4 <= out["stall"] < 3, out


def test_an_ip_literal_needs_no_lookup_and_a_name_still_resolves(monkeypatch):
    from odysseus.llm import connect

    looked_up = []
    real = socket.getaddrinfo
    monkeypatch.setattr(connect.socket, "getaddrinfo", lambda *a, **k: looked_up.append(a[0]) or real(*a, **k))
    answer = [with_length(PAYLOAD), b""]  # closed after each answer: every request connects anew
    server = RawServer([answer, answer])
    transport = Transport("t", TIMEOUTS)
    try:
        assert read(transport, url_of(server)) == PAYLOAD
        assert looked_up == []  # 127.0.0.1 is an address already
        assert read(transport, f"http://localhost:{server.port}/v1/chat/completions") == PAYLOAD
        assert looked_up == ["localhost"]
    finally:
        transport.close()
        server.close()
