"""static/js/sse_reader.js in the browser: frames split anywhere, CRLF, comments, errors, cut frames."""

from __future__ import annotations

from browser_helpers import open_app

SCRIPT = """async (chunks) => {
  const { readSSE, toEvent } = await import('/static/js/sse_reader.js');
  const encoder = new TextEncoder();
  const body = new ReadableStream({ start(controller) {
    for (const chunk of chunks) {
      controller.enqueue(typeof chunk === 'string' ? encoder.encode(chunk) : new Uint8Array(chunk));
    }
    controller.close();
  }});
  const seen = [];
  const result = await readSSE(new Response(body), (frame) => {
    seen.push(frame.comment !== undefined ? { comment: frame.comment } : { id: frame.id, event: toEvent(frame) });
    return toEvent(frame)?.type === 'error';
  });
  return { result, seen };
}"""


def test_parser_buffers_until_blank_line(server, page):
    open_app(page, server.url)
    euro = list("€".encode())  # a character split across two network chunks
    out = page.evaluate(
        SCRIPT,
        [
            ": connected\n\nid: 2\nda",
            'ta: {"delta":"Hi "}\n',
            "\n",
            'id: 3\r\ndata: {"delta":"',
            euro[:1],
            euro[1:] + list(b'"}\r\n\r\n'),
            ': heartbeat 1\n\nid: 4\ndata: {"type":"usage","data":{"output_tokens":2}}\n\n',
            'id: 5\nevent: error\ndata: {"error":"Read timeout","status":504}\n\n',
            'id: 6\ndata: {"delta":"never parsed"}\n\n',
        ],
    )
    assert out["result"] == "stopped"
    assert out["seen"] == [
        {"comment": "connected"},
        {"id": "2", "event": {"type": "delta", "delta": "Hi "}},
        {"id": "3", "event": {"type": "delta", "delta": "€"}},
        {"comment": "heartbeat 1"},
        {"id": "4", "event": {"type": "usage", "data": {"output_tokens": 2}}},
        {"id": "5", "event": {"type": "error", "error": "Read timeout", "status": 504}},
    ]


def test_frame_cut_by_end_of_stream_is_dropped(server, page):
    open_app(page, server.url)
    out = page.evaluate(SCRIPT, ['id: 2\ndata: {"delta":"a"}\n\n', 'id: 3\ndata: {"delta":"b"}\n', "data: [DONE]"])
    assert out["result"] == "eof"
    assert out["seen"] == [{"id": "2", "event": {"type": "delta", "delta": "a"}}]
