"""Fitting one turn's model messages into the window: what is cut, in which order (pure, no I/O).

Order, each step only while the estimate is still over the budget:

1. injected extras (``Injection`` with a ``score``: retrieved chunks, web text, recalled memories),
   lowest score first. Injections with ``score=None`` (attachments, pinned memories) stay;
2. the oldest turns. A *unit* is an older user message with everything up to the next user
   message (so a tool call and its result always go together); within the current turn (agent
   rounds after the newest user message) an assistant message with tool calls goes with its
   tool results, and the newest such round stays. System messages (the system prompt, the
   active document, a conversation summary, the injected block) are never dropped, and neither
   is the newest user message;
3. the newest user message is shortened from its end, with a marker the model sees.

``fit`` reports counts before and after; the caller turns them into ``context_trimmed``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Tuple

from . import Injection, apply_injections
from .tokens import TokenCounter

CONVERSATION_ROLES = ("user", "assistant", "tool")
#: characters of the newest message that are always kept
MIN_KEPT_CHARS = 200


@dataclass
class Fit:
    """The fitted messages and what it took."""

    messages: List[dict]
    kept: List[Injection]
    dropped: List[Injection] = field(default_factory=list)
    messages_before: int = 0
    messages_after: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    shortened_chars: int = 0

    @property
    def trimmed(self) -> bool:
        """Whether anything was cut."""
        return bool(self.dropped or self.shortened_chars or self.messages_after < self.messages_before)

    def counts(self, context_length: int) -> dict:
        """The ``context_trimmed`` payload."""
        return {
            "messages_before": self.messages_before,
            "messages_after": self.messages_after,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "context_length": context_length,
            "dropped_sources": [inj.source for inj in self.dropped],
            "shortened_chars": self.shortened_chars,
        }


def conversation_count(messages: List[dict]) -> int:
    """How many conversation messages (user, assistant, tool) a list holds."""
    return sum(1 for m in messages if m.get("role") in CONVERSATION_ROLES)


def _last_user(messages: List[dict]) -> int:
    return max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=len(messages))


def droppable_units(messages: List[dict]) -> List[List[int]]:
    """Index groups that may be dropped, oldest first (see the module docstring)."""
    last_user = _last_user(messages)
    units: List[List[int]] = []
    for i in range(last_user):
        role = messages[i].get("role")
        if role == "system":
            continue
        if role == "user" or not units:
            units.append([i])
        else:
            units[-1].append(i)
    rounds: List[List[int]] = []
    for i in range(last_user + 1, len(messages)):
        role = messages[i].get("role")
        if role == "assistant":
            rounds.append([i])
        elif role == "tool" and rounds:
            rounds[-1].append(i)
    return units + rounds[:-1]


def _shorten(message: dict, cut: int) -> Tuple[dict, int]:
    """The message without its last ``cut`` characters (keeping MIN_KEPT_CHARS), a marker instead; and how many."""
    content = message.get("content")
    if not isinstance(content, str):
        return message, 0
    keep = max(MIN_KEPT_CHARS, len(content) - cut)
    if keep >= len(content):
        return message, 0
    removed = len(content) - keep
    marker = f"\n\n[... the last {removed} characters of this message were cut to fit the model's context window ...]"
    return dict(message, content=content[:keep] + marker), removed


def fit(base: List[dict], injections: List[Injection], budget: int, counter: TokenCounter) -> Fit:
    """Fit ``base`` (the conversation) plus ``injections`` into ``budget`` tokens."""
    kept = list(injections)
    messages = list(base)
    result = Fit(messages=apply_injections(messages, kept), kept=kept, messages_before=conversation_count(base))
    total = result.tokens_before = counter.count(result.messages)
    # 1. extras, lowest score first
    for injection in sorted(
        (i for i in kept if i.score is not None and (i.text or i.parts)), key=lambda i: i.score or 0.0
    ):  # None filtered out above
        if total <= budget:
            break
        kept.remove(injection)
        result.dropped.append(injection)
        total = counter.count(apply_injections(messages, kept))
    # 2. the oldest turns (units never split a tool call from its result)
    if total > budget:
        drop: set = set()
        for unit in droppable_units(messages):
            if total <= budget:
                break
            drop.update(unit)
            total -= sum(counter.message(messages[i]) for i in unit)
        messages = [m for i, m in enumerate(messages) if i not in drop]
        total = counter.count(apply_injections(messages, kept))
    # 3. the newest user message, from its end
    last = _last_user(messages)
    if total > budget and last < len(messages):
        shortened, result.shortened_chars = _shorten(messages[last], counter.chars_for(total - budget) + 120)
        messages = messages[:last] + [shortened] + messages[last + 1 :]
    result.messages = apply_injections(messages, kept)
    result.tokens_after = counter.count(result.messages)
    result.messages_after = conversation_count(messages)
    return result
