"""The offline demo model: deterministic, clearly labelled, paced like a real model.

It needs no network, so a fresh install can show the whole pipeline working. The
reply depends only on the last user message, so tests can predict it.
"""

from __future__ import annotations

import re
from typing import Iterator, List

from ..cancel import CancelToken
from ..events import Event, delta, finish, usage
from .base import ChatRequest

DEMO_MODEL = "odysseus-demo"
DEMO_LABEL = "Offline demo model"

_WORD = re.compile(r"\S+\s*")


def demo_reply(prompt: str) -> str:
    """The deterministic reply to ``prompt``."""
    prompt = " ".join(prompt.split())
    shown = prompt if len(prompt) <= 80 else prompt[:77] + "..."
    return (
        f"This is the offline demo model of Odysseus. You said: \u201c{shown}\u201d. "
        "No model provider is configured, so this reply is generated locally, word by word, "
        "to show streaming, stop and resume working end to end. Configure OPENAI_BASE_URL, "
        "OLLAMA_HOST or ANTHROPIC_API_KEY to talk to a real model."
    )


def demo_thinking(prompt: str) -> str:
    """The deterministic reasoning part shown before the reply."""
    return f"The user wrote {len(prompt.split())} words. I will answer as the offline demo."


def tokenize(text: str) -> List[str]:
    """Split text into word-sized tokens that join back to the original."""
    return _WORD.findall(text)


class DemoProvider:
    """A provider that streams ``demo_reply`` with ``token_delay`` seconds between tokens."""

    kind = "demo"

    def __init__(self, name: str = "demo", token_delay: float = 0.03, reply_words: int = 0):
        self.name = name
        self.token_delay = token_delay
        self.reply_words = reply_words  # >0: pad the reply to this many words (long-run tests)

    def list_models(self) -> List[str]:
        """The one demo model."""
        return [DEMO_MODEL]

    def _prompt(self, request: ChatRequest) -> str:
        for message in reversed(request.messages):
            if message.get("role") == "user" and isinstance(message.get("content"), str):
                return message["content"]
        return ""

    def stream(self, request: ChatRequest, cancel: CancelToken) -> Iterator[Event]:
        """Yield reasoning, then the reply, one word at a time."""
        prompt = self._prompt(request)
        thinking = tokenize(demo_thinking(prompt))
        reply_text = demo_reply(prompt)
        if self.reply_words:
            words = tokenize(reply_text)
            filler = [f"word{i} " for i in range(max(0, self.reply_words - len(words)))]
            reply_text = "".join(words + filler)
        reply = tokenize(reply_text)
        for token in thinking:
            if cancel.wait(self.token_delay):
                return
            yield delta(token, thinking=True)
        for token in reply:
            if cancel.wait(self.token_delay):
                return
            yield delta(token)
        yield usage(len(prompt.split()), len(thinking) + len(reply))
        yield finish("stop")
