"""One turn's view of the model's window: compact if due, fit, announce, measure.

The hook every mode calls where its final message list is built (instead of ``announce`` +
``apply_injections``)::

    messages = yield from window.prepare(ctx, history, build, injections)
    ...
    yield from window.measured(stream_of_the_model, ctx)

``prepare`` (a generator returning the messages) does, in order:

1. the window (``window.WindowBook``), the reply reserve, and a token counter corrected by
   the session's last measured ratio (``tokens.correction_from``);
2. compaction, when ``build`` is given (a new turn built from history rows), the history's
   estimate is over ``COMPACT_THRESHOLD`` of the window and it has ``COMPACT_MIN_MESSAGES``
   messages: the older half is summarised and stored (``compaction.Compactor``), the messages
   rebuilt from the rows the model now sees. A failure changes nothing and becomes a notice;
3. ``trim.fit`` into window - reserve;
4. events: the kept injections' events (``announce``; same-type events of one source merged),
   the notices of dropped ones, ``compacted``, then ``context_trimmed`` when anything was cut.

Before sending, ``counted`` asks a provider that can count (llama.cpp's ``/tokenize``) for the
real prompt size when the estimate came within ``COUNT_MARGIN`` of the budget: a tokenizer
denser than the estimate's 4 characters per token must not make the server refuse the turn.

The saved reply's metadata gets ``context`` ({context_length, source, estimated_tokens, raw_tokens,
counted_tokens when counted, prompt_tokens, messages_sent, messages_total}) and, when cut,
``context_trimmed`` (its counts).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import replace
from typing import Any, Callable, Iterator, List, Optional

from ..cancel import Cancelled
from ..events import COMPACTED, CONTEXT_TRIMMED, NOTICE, USAGE, Event
from . import Injection
from .compaction import CompactionFailed, Compactor, is_summary, older_half, visible
from .tokens import MAX_CORRECTION, MIN_CORRECTION, TokenCounter, correction_from
from .trim import conversation_count, fit
from .window import WindowBook

log = logging.getLogger(__name__)

#: an estimate at this share of the budget or more is counted by the provider when it can count
COUNT_MARGIN = 0.6

#: rows the model sees -> the provider messages of this mode (system prompt, document, ...)
Build = Callable[[List[dict]], List[dict]]


def merged(injections: List[Injection]) -> List[Injection]:
    """Injections of one source whose events share a type, folded into one (e.g. pinned + recalled memories)."""
    out: List[Injection] = []
    for injection in injections:
        twin = next(
            (
                o
                for o in out
                if injection.event is not None
                and o.event is not None
                and o.source == injection.source
                and o.event.type == injection.event.type
                and isinstance(o.event.data.get("data"), list)
                and isinstance(injection.event.data.get("data"), list)
            ),
            None,
        )
        if twin is None or twin.event is None or injection.event is None:  # (both events are set on a twin)
            out.append(injection)
            continue
        data = twin.event.data["data"] + injection.event.data["data"]
        metadata = dict(twin.metadata)
        for key, value in injection.metadata.items():
            metadata[key] = (
                metadata[key] + value if isinstance(value, list) and isinstance(metadata.get(key), list) else value
            )
        out[out.index(twin)] = replace(
            twin,
            event=Event(twin.event.type, {**twin.event.data, "data": data}),
            metadata=metadata,
            notice=twin.notice or injection.notice,
        )
    return out


def announce(kept: List[Injection], dropped: List[Injection], ctx) -> Iterator[Event]:
    """Kept injections' events, notices and metadata; only the notices of dropped ones."""
    for injection in merged(kept):
        if injection.event is not None:
            yield injection.event
        if injection.notice:
            yield Event(NOTICE, {"message": injection.notice, "source": injection.source})
        ctx.metadata.update(injection.metadata)
    for injection in dropped:
        if injection.notice:
            yield Event(NOTICE, {"message": injection.notice, "source": injection.source})


class TurnWindow:
    """The window of one turn's model route (made per request by the routes; no Flask here)."""

    def __init__(
        self,
        book: WindowBook,
        compactor: Compactor,
        candidates: List[Any],
        max_tokens: Optional[int] = None,
        summary_candidates: Optional[List[Any]] = None,
    ):
        self.book = book
        self.compactor = compactor
        self.candidates = candidates
        self.max_tokens = max_tokens
        self.summary_candidates = summary_candidates or candidates

    def room(self, messages: List[dict], tools: Optional[List[dict]] = None) -> int:
        """The reply budget of one model request of this turn: the request's ``max_tokens`` when it gave
        one, and never more than what the window has left after ``messages`` and the tool schemas (by
        estimate), so a request never asks for output the server cannot fit (at least 1)."""
        length, _ = self.book.length(self.candidates[0])
        counter = TokenCounter(getattr(self.candidates[0].provider, "kind", None))
        used = counter.count(messages) + (
            counter.count([{"role": "system", "content": json.dumps(tools)}]) if tools else 0
        )
        left = max(1, length - used)
        return min(self.max_tokens, left) if self.max_tokens else left

    def prepare(
        self,
        ctx,
        history: List[dict],
        build: Optional[Build],
        injections: List[Injection],
        base: Optional[List[dict]] = None,
        correction: Optional[float] = None,
    ):
        """Yield the context events; return the messages to send (see the module docstring).

        ``correction`` (real tokens per estimated one) replaces the one learnt from the history: a
        provider that refused the request stated its real count (``overflow_counts``)."""
        candidate = self.candidates[0]
        length, source = self.book.length(candidate)
        budget = length - self.book.reserve(length, self.max_tokens)
        learnt = correction_from(history) if correction is None else correction
        counter = TokenCounter(getattr(candidate.provider, "kind", None), learnt)
        rows = visible(history)
        if base is None:
            assert build is not None, "prepare() needs build or base"
            base = build(rows)
        total = conversation_count(
            [r for r in history if r.get("role") in ("user", "assistant")]
        ) or conversation_count(base)
        compacted: Optional[Event] = None
        if build is not None and self.compactor.threshold > 0:
            compacted, rows, base = yield from self._maybe_compact(ctx, history, rows, base, build, counter, length)
        fitted = fit(base, injections, budget, counter)
        yield from announce(fitted.kept, fitted.dropped, ctx)
        if compacted is not None:
            yield compacted
        if fitted.trimmed:
            counts = fitted.counts(length)
            counts["messages_total"] = total
            ctx.metadata["context_trimmed"] = counts
            yield Event(CONTEXT_TRIMMED, {"data": counts})
        ctx.metadata["context"] = {
            "context_length": length,
            "source": source,
            "estimated_tokens": fitted.tokens_after,
            "raw_tokens": counter.raw(fitted.messages),
            "correction": round(counter.correction, 3),
            "messages_sent": fitted.messages_after,
            "messages_total": total,
        }
        return fitted.messages

    def _maybe_compact(self, ctx, history, rows, base, build, counter, length):
        """Compaction when due: ``(compacted event or None, rows, base)``; a failure yields a notice."""
        tokens = counter.count(base)
        conversation = [r for r in rows if not is_summary(r)]
        if tokens <= self.compactor.threshold * length or len(conversation) < self.compactor.min_messages:
            return None, rows, base
        chosen = older_half(rows)
        if not chosen:
            return None, rows, base
        try:
            summary = self.compactor.compact(
                ctx.owner, ctx.session_id, chosen, self.summary_candidates, length, ctx.cancel
            )
        except Cancelled:
            raise
        except CompactionFailed as exc:
            log.info("compaction of %s failed: %s", ctx.session_id, exc)
            yield Event(
                NOTICE,
                {
                    "message": f"Older messages could not be summarised ({exc.message}); "
                    "they were trimmed to fit instead.",
                    "source": "compaction",
                },
            )
            return None, rows, base
        new_rows = visible(history + [summary])
        new_base = build(new_rows)
        data = {
            "messages_before": conversation_count(base),
            "messages_after": conversation_count(new_base),
            "tokens_before": tokens,
            "tokens_after": counter.count(new_base),
            "message_id": summary["id"],
            "summarized_ids": summary["metadata"]["summarized_ids"],
            "summary": summary["content"],
        }
        ctx.metadata["compacted"] = {k: v for k, v in data.items() if k != "summary"}
        return Event(COMPACTED, {"context_length": length, "data": data}), new_rows, new_base

    def recalibrated(self, ctx, real_tokens: int) -> Optional[float]:
        """The correction that makes this turn's estimate of what it sent come out at ``real_tokens``
        (what the provider counted when it refused it), or None when nothing was estimated."""
        sent = ctx.metadata.get("context") or {}
        raw = sent.get("raw_tokens")
        if not isinstance(raw, int) or raw <= 0 or real_tokens <= 0:
            return None
        return min(MAX_CORRECTION, max(MIN_CORRECTION, real_tokens / raw * 1.05))  # and a margin

    def counted(self, ctx, messages: List[dict]) -> Optional[int]:
        """The provider's exact count of ``messages`` when this turn's estimate came within
        ``COUNT_MARGIN`` of its budget and the provider can count (llama.cpp), else None. The count
        goes into the reply's ``context`` metadata (``counted_tokens``)."""
        context = ctx.metadata.get("context") or {}
        length, estimated = context.get("context_length"), context.get("estimated_tokens")
        if not isinstance(length, int) or not isinstance(estimated, int):
            return None
        budget = length - self.book.reserve(length, self.max_tokens)
        if estimated < budget * COUNT_MARGIN:
            return None
        real = self.book.prompt_tokens(self.candidates[0], messages)
        if real is not None:
            context["counted_tokens"] = real
            if real <= budget:
                return None
        return real

    def measured(self, events: Iterator[Event], ctx) -> Iterator[Event]:
        """Pass ``events`` on; the first usage report's prompt tokens go into the reply's ``context`` metadata."""
        for event in events:
            if event.type == USAGE:
                context = ctx.metadata.get("context")
                prompt = (event.data.get("data") or {}).get("input_tokens")
                if context is not None and "prompt_tokens" not in context and isinstance(prompt, int) and prompt > 0:
                    context["prompt_tokens"] = prompt
            yield event


#: how providers word "the prompt does not fit": (pattern, group of the prompt's tokens)
_OVERFLOW = (
    # llama.cpp: "request (1901 tokens) exceeds the available context size (512 tokens)"
    (re.compile(r"request \((\d+) tokens\) exceeds the available context size \((\d+) tokens\)"), 1),
    # OpenAI: "maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens"
    # vLLM: "... is 2048 tokens. However, you requested 2100 tokens (1900 in the messages, 200 in the completion)"
    (
        re.compile(
            r"maximum context length is (\d+) tokens.*?(?:resulted in|requested) (\d+) tokens"
            r"(?: \((\d+) in the messages)?",
            re.S,
        ),
        0,
    ),
)


def overflow_count(message: str) -> Optional[int]:
    """The prompt's real token count a context-size refusal states, or None for any other error."""
    for pattern, group in _OVERFLOW:
        found = pattern.search(message or "")
        if found is None:
            continue
        if group:
            return int(found.group(group))
        return int(found.group(3) or found.group(2))
    return None
