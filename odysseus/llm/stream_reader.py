"""Provider stream readers: HTTP chunked bodies, SSE and NDJSON, parsed from large raw reads.

The three adapters (OpenAI-compatible and Anthropic speak SSE, Ollama NDJSON) read the body
through these functions. They work on whole reads (up to ``http.READ_SIZE`` bytes, often
hundreds of events at once) with plain bytes and str operations: one decode and one split
per read, no per-line or per-chunk library calls.

Invariants (the same as the line-by-line parsers they replace):

- however the bytes are split across reads, the same events come out in the same order;
- lines end at ``\\n``; trailing ``\\r`` are dropped (CRLF bodies); a ``\\n`` never falls
  inside a UTF-8 sequence, so a character split across reads is decoded whole;
- invalid UTF-8 raises ``UnicodeDecodeError`` at the line that carries it (events before it
  are delivered first), which ``http_errors.provider_errors`` reports as a malformed chunk;
- SSE: a block ends at a blank line; as in ``EventSource`` a block without ``data:`` is no
  event, comments (``:``) are skipped, several ``data:`` lines are joined with ``\\n``, and
  an unfinished block at the end of the body is dropped.
"""

from __future__ import annotations

import http.client
import itertools
from typing import Callable, Iterable, Iterator, List, Optional, Tuple

#: the longest chunk-size or trailer line accepted (as http.client's ``_MAXLINE``)
MAX_LINE = 65536
#: what ASCII whitespace is to ``bytes.strip`` (an NDJSON line of only these is skipped)
_ASCII_SPACE = " \t\n\r\x0b\x0c"

_SIZE, _DATA, _CRLF, _TRAILER, _DONE = range(5)
_DATA_PREFIX = itertools.repeat("data: ")  # endless and stateless: shared by every map() below
_CR = itertools.repeat("\r")
_HEX = itertools.repeat(16)


def _whole_chunks(buf: bytes, out: List[bytes]) -> int:
    """Decode the run of whole chunks ``buf`` starts with (at a size line) by C-level list operations; its length.

    The common read of a streaming body is ``size CRLF payload CRLF`` repeated (a provider
    sends one chunk per event). Split at CRLF, such a run is pairs (size line, payload) whose
    sizes are the payloads' lengths: checked all at once, it is exactly what the state machine
    would read. Anything else (an extension, a bare LF or a CRLF inside a payload, a trailer,
    a bad size) returns 0 and the state machine reads ``buf`` itself; the last chunk and the
    incomplete tail (a size line whose data has not all come, a partial line) are left to it.
    """
    parts = buf.split(b"\r\n")
    del parts[-1]  # what follows the last CRLF: incomplete, or nothing
    if len(parts) % 2:
        del parts[-1]  # a size line whose payload is not all here
    if not parts:
        return 0
    heads = parts[0::2]
    bodies = parts[1::2]
    try:
        sizes = list(map(int, heads, _HEX))
    except ValueError:
        return 0
    if 0 in sizes:  # the last chunk: the run ends before it (its trailer is the state machine's)
        count = sizes.index(0)
        del sizes[count:], heads[count:], bodies[count:]
    if not sizes or sizes != list(map(len, bodies)) or b"\n" in b"".join(heads):
        return 0
    out.append(b"".join(bodies))
    return sum(sizes) + sum(map(len, heads)) + 4 * len(heads)


class ChunkedDecoder:
    """HTTP/1.1 ``Transfer-Encoding: chunked``, decoded from raw reads of any size.

    Lenient exactly where ``http.client`` is (chunk extensions ignored, the CRLF after a chunk
    skipped unchecked, trailers discarded); a bad size line or a body cut short raises
    ``http.client.IncompleteRead`` as ``http.client`` does.
    """

    def __init__(self) -> None:
        self.buffer = b""
        self.left = 0  # payload bytes still to come in the current chunk
        self.state = _SIZE

    @property
    def done(self) -> bool:
        """True once the last chunk and the trailer have been read."""
        return self.state == _DONE

    def feed(self, raw: bytes) -> bytes:
        """The payload bytes in ``raw`` (plus whatever an earlier read left incomplete)."""
        buf = self.buffer + raw if self.buffer else raw
        out: List[bytes] = []
        pos, end, state = 0, len(buf), self.state
        tried = False  # the run of whole chunks, once per read: where the first size line starts
        while pos < end and state != _DONE:
            if state == _SIZE and not tried:
                tried = True
                took = _whole_chunks(buf[pos:] if pos else buf, out)
                if took:
                    pos += took
                    continue
            if state == _DATA:
                take = min(self.left, end - pos)
                out.append(buf[pos : pos + take])
                pos += take
                self.left -= take
                if not self.left:
                    state = _CRLF
            elif state == _CRLF:
                if end - pos < 2:
                    break
                pos += 2
                state = _SIZE
            else:  # a size line or a trailer line
                nl = buf.find(b"\n", pos)
                if nl < 0:
                    if end - pos > MAX_LINE:
                        raise http.client.LineTooLong("chunk size")
                    break
                line = buf[pos:nl]
                pos = nl + 1
                if state == _TRAILER:
                    if not line.strip(b"\r"):
                        state = _DONE
                    continue
                try:  # int() allows the surrounding whitespace (the CR); an extension needs the split
                    size = int(line, 16) if b";" not in line else int(line.split(b";", 1)[0], 16)
                except ValueError:
                    raise http.client.IncompleteRead(b"") from None
                if size < 0:
                    raise http.client.IncompleteRead(b"")
                if not size:
                    state = _TRAILER
                elif end - pos >= size + 2:  # the whole chunk and its CRLF are here: take it in one step
                    out.append(buf[pos : pos + size])
                    pos += size + 2
                else:
                    self.left, state = size, _DATA
        self.state = state
        self.buffer = b"" if state == _DONE else buf[pos:]
        return out[0] if len(out) == 1 else b"".join(out)

    def end_of_input(self) -> None:
        """The connection ended: fine after the last chunk (a missing trailer too), else IncompleteRead."""
        if self.state == _TRAILER:
            self.state = _DONE
        if self.state != _DONE:
            raise http.client.IncompleteRead(b"")


def dechunked(decoder: ChunkedDecoder, read: Callable[[], bytes]) -> Iterator[bytes]:
    """The payload of a chunked body from ``read()`` calls, until its last chunk (``IncompleteRead``
    when the input ends before it). ``read`` returns b"" at the end of the input."""
    while not decoder.done:
        data = read()
        if not data:
            decoder.end_of_input()
            break
        payload = decoder.feed(data)
        if payload:
            yield payload


def _lines(chunks: Iterable[bytes], tail: List[bytes]) -> Iterator[List[str]]:
    """The complete lines of each read, decoded (``\\r`` kept); the unterminated rest is left in ``tail[0]``."""
    buffer = b""
    for chunk in chunks:
        buffer = buffer + chunk if buffer else chunk
        cut = buffer.rfind(b"\n")
        if cut < 0:
            continue
        block, buffer = buffer[:cut], buffer[cut + 1 :]
        try:
            yield block.decode("utf-8").split("\n")
        except UnicodeDecodeError:  # decode line by line: the lines before the bad one still count
            yield _decoded_lines(block)
    tail[0] = buffer


def _decoded_lines(block: bytes) -> List[str]:
    out: List[str] = []
    for raw in block.split(b"\n"):
        try:
            out.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            return _RaiseAfter(out, raw)
    return out


class _RaiseAfter(list):
    """The lines before an undecodable one; iterating past them raises its UnicodeDecodeError."""

    def __init__(self, good: List[str], bad: bytes):
        super().__init__(good)
        self.bad = bad

    def __iter__(self):
        yield from list.__iter__(self)
        self.bad.decode("utf-8")  # raises


def sse_batches(chunks: Iterable[bytes]) -> Iterator[List[Tuple[str, str]]]:
    """The SSE events of a byte stream as one list per read: ``[(event name, data), ...]`` (name ``message`` when none).

    An adapter loops over each list (no generator resumed per event). A read whose bytes stop
    being UTF-8 yields the events before the bad line, then raises ``UnicodeDecodeError``.
    """
    name: Optional[str] = None
    data: List[str] = []
    has_data = False
    # the unterminated rest of the body is dropped undecoded, as EventSource drops an unfinished block
    for lines in _lines(chunks, [b""]):
        if not has_data and name is None and lines.__class__ is list and not len(lines) % 2:
            # The common read: whole events of one data line each, ["data: a", "", "data: b", ""].
            # Tested in C (no per-line bytecode), it is what the loop below makes of those lines.
            firsts = lines[0::2]
            if (
                not any(lines[1::2])
                and all(map(str.startswith, firsts, _DATA_PREFIX))
                and not any(map(str.endswith, firsts, _CR))
            ):
                yield [("message", line[6:]) for line in firsts]
                continue
        batch: List[Tuple[str, str]] = []
        try:
            for line in lines:
                if line[-1:] == "\r":
                    line = line.rstrip("\r")
                if not line:
                    if has_data:
                        batch.append((name or "message", data[0] if len(data) == 1 else "\n".join(data)))
                    name, data, has_data = None, [], False
                    continue
                if line[:6] == "data: ":  # the common line: what the partition below makes of it
                    data.append(line[6:])
                    has_data = True
                    continue
                if line[0] == ":":
                    continue
                field, _, value = line.partition(":")
                if value[:1] == " ":
                    value = value[1:]
                if field == "data":
                    data.append(value)
                    has_data = True
                elif field == "event":
                    name = value
        except UnicodeDecodeError:
            if batch:
                yield batch
            raise
        if batch:
            yield batch


def sse_events(chunks: Iterable[bytes]) -> Iterator[Tuple[str, str]]:
    """``(event name, data)`` for each SSE event of a byte stream (name ``message`` when none)."""
    for batch in sse_batches(chunks):
        yield from batch


def ndjson_lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """The non-blank lines of an NDJSON body (the last one may lack its newline)."""
    tail = [b""]
    for lines in _lines(chunks, tail):
        for line in lines:
            if line.strip(_ASCII_SPACE):
                yield line
    if tail[0].strip():
        yield tail[0].decode("utf-8")
