"""The OpenAI adapter's no-JSON path for plain token chunks (odysseus.llm.plain_chunks).

Whatever the stream, the adapter must yield exactly the events it yields with every chunk
parsed in full; the streams here mix plain tokens with everything that must not be taken for
one: escapes, quotes, control characters, a changed id, unknown keys, a look-alike
``"content":"`` elsewhere in the document, reasoning, tool calls, finish and usage chunks.
"""

from __future__ import annotations

import json
import random
from typing import List

import pytest

from odysseus.config import DEFAULTS
from odysseus.llm.base import ChatRequest, ProviderConfig
from odysseus.llm.openai_compat import OpenAICompatProvider
from odysseus.llm.plain_chunks import PlainContent

BASE = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
TEXTS = [
    "tok ",
    "é",
    "😀",
    'say "hi"',
    "back\\slash",
    "tab\there",
    "nl\n",
    "\x01",
    "</think>",
    "<think>",
    "",
    "\u2028",
    "plain words",
    "x" * 300,
]


class _Body:
    """What ``_events`` reads from a response: the body in reads, and the output mark."""

    def __init__(self, raw: bytes, size: int):
        self.pieces = [raw[i : i + size] for i in range(0, len(raw), size)]

    def chunks(self):
        return iter(self.pieces)

    def mark_output(self):
        pass


def _chunk(rng: random.Random, doc_id: str) -> str:
    kind = rng.random()
    text = rng.choice(TEXTS)
    delta = {"content": text}
    choice: dict = {"index": 0, "delta": delta, "finish_reason": None}
    doc = dict(BASE, id=doc_id, choices=[choice])
    if kind < 0.05:
        doc["obfuscation"] = "zz"  # a known per-chunk key
    elif kind < 0.08:
        doc["surprise"] = {"content": text}  # unknown key: provider_meta, and a look-alike
    elif kind < 0.11:
        choice["logprobs"] = {"content": text}  # a look-alike the adapter ignores
    elif kind < 0.14:
        delta["reasoning_content"] = "hmm"
    elif kind < 0.16:
        delta["tool_calls"] = [{"index": 0, "id": "call_1", "function": {"name": "f", "arguments": '{"a":'}}]
    elif kind < 0.18:
        delta["role"] = "assistant"
    elif kind < 0.20:
        delta["extra_field"] = 1
    ensure_ascii = rng.random() < 0.2
    separators = (",", ":") if rng.random() < 0.8 else (", ", ": ")
    return json.dumps(doc, ensure_ascii=ensure_ascii, separators=separators)


def _stream(seed: int) -> bytes:
    rng = random.Random(seed)
    doc_id = "chatcmpl-1"
    frames = [json.dumps(dict(BASE, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""}}]))]
    for _ in range(rng.randint(5, 60)):
        if rng.random() < 0.03:
            doc_id = f"chatcmpl-{rng.randint(2, 9)}"  # a new id mid-stream: parsed in full again
        frames.append(_chunk(rng, doc_id))
    frames.append(json.dumps(dict(BASE, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])))
    frames.append(json.dumps(dict(BASE, choices=[], usage={"prompt_tokens": 1, "completion_tokens": 2})))
    frames.append("[DONE]")
    return "".join(f"data: {f}\n\n" for f in frames).encode()


def _events(raw: bytes, size: int, think_tags: bool) -> List:
    cfg = ProviderConfig(
        name="p", kind="openai", base_url="http://127.0.0.1:9/v1", models=["m"], options={"think_tags": think_tags}
    )
    provider = OpenAICompatProvider(cfg, dict(DEFAULTS))
    return list(provider._events(_Body(raw, size), ChatRequest(model="m", messages=[])))


@pytest.mark.parametrize("seed", range(60))
def test_fast_path_yields_exactly_what_full_parsing_yields(seed, monkeypatch):
    raw = _stream(seed)
    size = random.Random(seed).choice([7, 100, 1 << 16])
    think_tags = seed % 2 == 0
    fast = _events(raw, size, think_tags)
    monkeypatch.setattr(PlainContent, "content", lambda self, data: None)
    assert fast == _events(raw, size, think_tags)


def test_plain_token_chunks_take_the_fast_path():
    docs = [
        dict(BASE, choices=[{"index": 0, "delta": {"content": f"t{i} "}, "finish_reason": None}]) for i in range(10)
    ]
    plain = PlainContent()
    first = json.dumps(docs[0], separators=(",", ":"))
    plain.learn(first, docs[0], None)
    assert [plain.content(json.dumps(d, separators=(",", ":"))) for d in docs[1:]] == [f"t{i} " for i in range(1, 10)]
    assert plain.content(json.dumps(docs[1])) is None  # other spacing: not the template
    escaped = json.dumps(
        dict(docs[1], choices=[{"index": 0, "delta": {"content": 'a"b'}, "finish_reason": None}]), separators=(",", ":")
    )
    assert plain.content(escaped) is None  # an escape: parsed in full


def test_a_look_alike_content_key_is_never_the_template():
    doc = dict(
        BASE, choices=[{"index": 0, "delta": {"content": "x"}, "finish_reason": None, "logprobs": {"content": "x"}}]
    )
    data = json.dumps(doc, separators=(",", ":"))
    plain = PlainContent()
    plain.learn(data, doc, None)
    assert plain.head is None  # "content":" twice
    # the delta's key spelled with an escape: the only raw "content":" is the look-alike; the probe refuses it
    tricky = data.replace('"delta":{"content":', '"delta":{"cont\\u0065nt":', 1)
    assert tricky.count('"content":"') == 1 and json.loads(tricky) == doc
    plain.learn(tricky, json.loads(tricky), None)
    assert plain.head is None
    alone = data.replace(',"logprobs":{"content":"x"}', "")
    plain.learn(alone, json.loads(alone), None)
    assert plain.head is not None  # without the look-alike it is a template
