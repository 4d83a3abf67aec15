"""Per-completion metrics: timing, tokens (estimated when the provider sends none), cost."""

from __future__ import annotations

import json
import time
from typing import List, Optional

from ..events import DELTA, METRICS, TOOL_CALL, USAGE, Event

CHARS_PER_TOKEN = 4  # a rough, model-independent estimate; marked as such wherever used


def estimate_tokens(text_chars: int) -> int:
    """Tokens for ``text_chars`` characters, estimated."""
    return max(1, round(text_chars / CHARS_PER_TOKEN)) if text_chars else 0


def message_chars(messages: List[dict], tools: Optional[List[dict]] = None) -> int:
    """Characters a request sends, for estimating its input tokens."""
    total = 0
    for message in messages:
        content = message.get("content")
        total += len(content) if isinstance(content, str) else len(json.dumps(content or "", ensure_ascii=False))
        if message.get("tool_calls"):
            total += len(json.dumps(message["tool_calls"], ensure_ascii=False))
    if tools:
        total += len(json.dumps(tools, ensure_ascii=False))
    return total


def cost_of(price: Optional[dict], input_tokens: Optional[int], output_tokens: Optional[int]) -> Optional[float]:
    """Cost from a price entry (``input_per_mtok``, ``output_per_mtok``, per million tokens)."""
    if not price:
        return None
    try:
        cost = (input_tokens or 0) * float(price.get("input_per_mtok", 0)) / 1e6
        cost += (output_tokens or 0) * float(price.get("output_per_mtok", 0)) / 1e6
    except (TypeError, ValueError):
        return None
    return round(cost, 8)


class CompletionMetrics:
    """Timing and token counters of one completion, started when the candidate is asked."""

    def __init__(self, input_chars: int = 0, price: Optional[dict] = None) -> None:
        self.started = time.monotonic()
        self.first_token_at: Optional[float] = None
        self.output_chars = 0
        self.input_chars = input_chars
        self.input_tokens: Optional[int] = None
        self.output_tokens: Optional[int] = None
        self.price = price

    def observe(self, event: Event) -> None:
        """Fold one provider event into the counters."""
        if event.type in (DELTA, TOOL_CALL):
            if self.first_token_at is None:
                self.first_token_at = time.monotonic()
            if event.type == DELTA:
                self.output_chars += len(event.data.get("delta", ""))
            else:
                self.output_chars += len(event.data.get("name", "")) + len(json.dumps(event.data.get("arguments")))
        elif event.type == USAGE:
            data = event.data.get("data", {})
            if data.get("input_tokens") is not None:
                self.input_tokens = data["input_tokens"]
            if data.get("output_tokens") is not None:
                self.output_tokens = data["output_tokens"]

    def event(self, route_id: str, partial: bool = False) -> Event:
        """The ``metrics`` event."""
        total = time.monotonic() - self.started
        output, output_estimated = self.output_tokens, self.output_tokens is None
        if output_estimated:
            output = estimate_tokens(self.output_chars)
        input_tokens, input_estimated = self.input_tokens, self.input_tokens is None
        if input_estimated:
            input_tokens = estimate_tokens(self.input_chars)
        ttft = None if self.first_token_at is None else self.first_token_at - self.started
        gen_time = total - (ttft or 0)
        data = {
            "total_time": round(total, 4),
            "time_to_first_token": None if ttft is None else round(ttft, 4),
            "input_tokens": input_tokens,
            "output_tokens": output,
            "input_tokens_estimated": input_estimated,
            "output_tokens_estimated": output_estimated,
            "tokens_estimated": input_estimated or output_estimated,
            "tokens_per_second": round(output / gen_time, 2) if output and gen_time > 0 else None,
            "route": route_id,
        }
        cost = cost_of(self.price, input_tokens, output)
        if cost is not None:
            data["cost"] = cost
            data["cost_currency"] = str((self.price or {}).get("currency", "USD"))
            data["cost_estimated"] = input_estimated or output_estimated
        if partial:
            data["partial"] = True
        return Event(METRICS, {"data": data})
