"""Token estimates for what is sent to a model, and their correction by the provider's real count.

Why characters and not a tokenizer library: one server answers with llama, qwen, mistral, claude
or gpt models, each with its own vocabulary, and the libraries that know them either download
vocabularies at run time (tiktoken) or are large per-family packages (tokenizers + model files).
A self-hosted app cannot assume either. So the estimate is ``characters / chars_per_token`` with
a per-provider factor (English prose is ~4 characters per token for GPT-style vocabularies,
a little less for llama-family and Claude vocabularies), plus a small per-message overhead for
the chat template, and a fixed cost per image part.

The estimate is then *calibrated*: after each turn the provider reports the real prompt size
(``usage.input_tokens``); the turn keeps ``{raw_tokens, prompt_tokens}`` in the saved reply's
metadata (``context``), and the next estimate of that session is multiplied by
``prompt_tokens / raw_tokens`` of the newest such reply (bounded to 0.25..4). Estimates thus
converge on what the model's own tokenizer counts.
"""

from __future__ import annotations

import json
from typing import Dict, Iterable, List, Optional, Tuple

#: characters per token by provider kind (adapters' ``kind``); unknown kinds use DEFAULT_CHARS_PER_TOKEN
CHARS_PER_TOKEN = {"openai": 4.0, "anthropic": 3.5, "ollama": 3.6, "demo": 4.0}
DEFAULT_CHARS_PER_TOKEN = 3.8
#: role markers and separators the chat template adds to every message
MESSAGE_OVERHEAD = 4
#: what one image part costs (providers differ widely; a middle value)
IMAGE_TOKENS = 800
#: a correction factor outside this range is a broken report, not a tokenizer difference
MIN_CORRECTION, MAX_CORRECTION = 0.25, 4.0


def chars_per_token(provider_kind: Optional[str]) -> float:
    """The characters-per-token factor for a provider kind."""
    return CHARS_PER_TOKEN.get(provider_kind or "", DEFAULT_CHARS_PER_TOKEN)


def _text(content) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def message_chars(message: dict) -> int:
    """The characters of one provider message that reach the model (content, tool calls, tool ids)."""
    chars = len(_text(message.get("content")))
    if message.get("tool_calls"):
        chars += len(json.dumps(message["tool_calls"], ensure_ascii=False))
    if message.get("tool_call_id"):
        chars += len(str(message["tool_call_id"]))
    return chars


class TokenCounter:
    """Estimates tokens for one provider kind, optionally corrected by a session's measured ratio."""

    def __init__(self, provider_kind: Optional[str] = None, correction: float = 1.0):
        self.cpt = chars_per_token(provider_kind)
        self.correction = min(MAX_CORRECTION, max(MIN_CORRECTION, float(correction or 1.0)))
        # [issue 22] one turn's trimming counts the same message dicts several times over (the whole
        # conversation, again after each drop, the raw total); a count is kept per dict for this
        # counter's life (one turn). Keyed by id() with the dict itself held, so an id is never reused
        # while its entry lives; messages are never changed in place once built (trim copies them).
        self._counted: Dict[int, Tuple[dict, int]] = {}

    def raw_message(self, message: dict) -> int:
        """The uncorrected estimate of one message."""
        known = self._counted.get(id(message))
        if known is not None and known[0] is message:
            return known[1]
        images = sum(1 for p in message.get("parts") or [] if isinstance(p, dict) and p.get("type") == "image")
        tokens = int(message_chars(message) / self.cpt + 0.999) + MESSAGE_OVERHEAD + images * IMAGE_TOKENS
        self._counted[id(message)] = (message, tokens)
        return tokens

    def raw(self, messages: Iterable[dict]) -> int:
        """The uncorrected estimate of a message list (what calibration compares with the real count)."""
        return sum(self.raw_message(m) for m in messages)

    def count(self, messages: Iterable[dict]) -> int:
        """The corrected estimate of a message list."""
        return int(self.raw(messages) * self.correction + 0.5)

    def message(self, message: dict) -> int:
        """The corrected estimate of one message."""
        return int(self.raw_message(message) * self.correction + 0.5)

    def chars_for(self, tokens: int) -> int:
        """About how many characters make ``tokens`` corrected tokens."""
        return max(0, int(tokens / self.correction * self.cpt))


def correction_from(history: List[dict]) -> float:
    """``prompt_tokens / raw_tokens`` of the newest saved reply that measured both (1.0 when none did)."""
    for row in reversed(history):
        if row.get("role") != "assistant":
            continue
        measured = (row.get("metadata") or {}).get("context") or {}
        raw, real = measured.get("raw_tokens"), measured.get("prompt_tokens")
        if isinstance(raw, int) and isinstance(real, int) and raw > 0 and real > 0:
            return min(MAX_CORRECTION, max(MIN_CORRECTION, real / raw))
    return 1.0
