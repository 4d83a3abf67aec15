"""Reading SSE over a real socket in tests: frames as dicts, with the ability to drop mid-stream."""

from __future__ import annotations

import json
from typing import Dict, Iterator, List, Optional

import requests

from odysseus.sse import parse_sse


class Stream:
    """An open SSE response; iterate ``frames()`` and ``close()`` to drop the connection."""

    def __init__(self, response: requests.Response):
        self.response = response
        self.headers = response.headers
        self.status_code = response.status_code
        self._frames = self._parse()

    def frames(self) -> Iterator[Dict]:
        """Each frame: ``event``, ``data`` (parsed JSON or the raw text), ``id`` (int) or ``comment``.

        One iterator per stream: reading stops where the caller stopped and continues there.
        """
        return self._frames

    def _parse(self) -> Iterator[Dict]:
        for frame in parse_sse(self.response.iter_content(chunk_size=None)):
            if frame.get("comment") is not None:
                yield {"comment": frame["comment"]}
                continue
            data = frame.get("data")
            parsed = data
            if data is not None and data != "[DONE]":
                try:
                    parsed = json.loads(data)
                except ValueError:
                    parsed = data
            yield {"event": frame.get("event"), "data": parsed, "id": int(frame["id"]) if frame.get("id") else None}

    def events(self) -> List[Dict]:
        """Every non-comment frame until the server ends the stream."""
        return [f for f in self.frames() if "comment" not in f]

    def close(self) -> None:
        """Drop the connection."""
        self.response.close()


def open_stream(method: str, url: str, timeout: float = 30, **kwargs) -> Stream:
    """Send the request and return the open stream (headers read, body not)."""
    response = requests.request(method, url, stream=True, timeout=timeout, **kwargs)
    return Stream(response)


def post_chat(base: str, message: str, timeout: float = 30, headers: Optional[dict] = None, **fields) -> Stream:
    """POST /api/chat_stream with a JSON body."""
    return open_stream(
        "POST", base + "/api/chat_stream", timeout=timeout, json={"message": message, **fields}, headers=headers
    )


def text_of(frames: List[Dict], thinking: bool = False) -> str:
    """The assistant text (or reasoning) carried by ``delta`` frames."""
    return "".join(
        f["data"]["delta"]
        for f in frames
        if isinstance(f.get("data"), dict) and "delta" in f["data"] and bool(f["data"].get("thinking")) == thinking
    )


def types_of(frames: List[Dict]) -> List[str]:
    """A readable type per frame: delta, the JSON type, [DONE], or the SSE event name."""
    out = []
    for f in frames:
        data = f.get("data")
        if f.get("event") not in (None, "message"):
            out.append(f["event"])
        elif data == "[DONE]":
            out.append("[DONE]")
        elif isinstance(data, dict) and "type" in data:
            out.append(data["type"])
        elif isinstance(data, dict) and "delta" in data:
            out.append("delta")
        else:
            out.append(repr(data))
    return out
