"""llm_core: route resolution, fallback between candidates, and metrics.

A *route* is an ordered list of candidates ``(provider, model)``. ``stream_route``
tries them in order; the next candidate is tried only when the current one fails
before any real output (a content, reasoning or tool-call event). Once output has
started the error is raised, never retried elsewhere, so text is never duplicated.

Events yielded, in order: ``model_info`` (the candidate actually used), possibly
``fallback`` (right after it, when a backup answered), the provider's deltas and
tool calls, ``usage``, then ``metrics``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Dict, Iterable, Iterator, List, Optional

from ..cancel import CancelToken
from ..errors import NotFound, ProviderError
from ..events import (DELTA, FINISH, TOOL_CALL, USAGE, Event, FALLBACK, METRICS, MODEL_INFO)
from .base import ChatRequest, Provider
from .demo import DEMO_LABEL, DEMO_MODEL


@dataclass(frozen=True)
class Candidate:
    """One (provider, model) pair of a route."""

    provider: Provider
    model: str

    @property
    def route_id(self) -> str:
        """``provider/model``: how routes are named in events and config."""
        return f"{self.provider.name}/{self.model}"


class ModelRouter:
    """Resolves a requested model name to the candidates of its route."""

    def __init__(self, providers: Iterable[Provider], routes: Optional[Dict[str, List[str]]] = None,
                 default_model: str = ""):
        self.providers: Dict[str, Provider] = {p.name: p for p in providers}
        self.routes = dict(routes or {})
        self.default_model = default_model

    def _default(self) -> str:
        if self.default_model:
            return self.default_model
        if "default" in self.routes:
            return "default"
        first = next(iter(self.providers.values()))
        default = getattr(first, "default_model", None)
        return f"{first.name}/{default}" if default else f"{first.name}/"

    def _candidate(self, spec: str) -> Candidate:
        name, _, model = spec.partition("/")
        provider = self.providers.get(name)
        if provider is None:
            # A bare model name (which may itself contain "/"): served by the only provider.
            if len(self.providers) == 1:
                provider = next(iter(self.providers.values()))
                return self._checked(Candidate(provider, spec))
            raise NotFound(f"unknown model {spec!r}: name it as provider/model")
        if not model:
            model = getattr(provider, "default_model", None) or (provider.list_models() or [""])[0]
            if not model:
                raise NotFound(f"provider {name!r} has no default model; name one as {name}/MODEL")
        return self._checked(Candidate(provider, model))

    @staticmethod
    def _checked(candidate: Candidate) -> Candidate:
        """The demo provider knows its only model; remote providers answer 404 themselves."""
        if candidate.provider.kind == "demo" and candidate.model not in candidate.provider.list_models():
            raise NotFound(f"unknown model {candidate.model!r}; the offline demo serves {DEMO_MODEL!r}")
        return candidate

    def resolve(self, model: Optional[str]) -> List[Candidate]:
        """The candidates for ``model`` (a route name, ``provider/model``, or a bare model)."""
        spec = (model or "").strip() or self._default()
        if spec in self.routes:
            return [self._candidate(item) for item in self.routes[spec]]
        return [self._candidate(spec)]


def model_info(candidate: Candidate) -> Event:
    """The ``model_info`` event for the candidate that answers."""
    data = {"provider": candidate.provider.name, "model": candidate.model, "route": candidate.route_id}
    if candidate.provider.kind == "demo":
        data.update({"model": DEMO_MODEL, "label": DEMO_LABEL, "offline_demo": True})
    else:
        data["label"] = candidate.route_id
    return Event(MODEL_INFO, data)


def _is_output(event: Event) -> bool:
    return event.type in (DELTA, TOOL_CALL)


class _Metrics:
    """Timing and token counters of one completion."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.first_token_at: Optional[float] = None
        self.output_chars = 0
        self.input_tokens: Optional[int] = None
        self.output_tokens: Optional[int] = None

    def observe(self, event: Event) -> None:
        if event.type == DELTA:
            if self.first_token_at is None:
                self.first_token_at = time.monotonic()
            self.output_chars += len(event.data.get("delta", ""))
        elif event.type == USAGE:
            data = event.data.get("data", {})
            self.input_tokens = data.get("input_tokens", self.input_tokens)
            self.output_tokens = data.get("output_tokens", self.output_tokens)

    def event(self, candidate: Candidate) -> Event:
        total = time.monotonic() - self.started
        output = self.output_tokens
        estimated = output is None
        if estimated:
            output = max(1, round(self.output_chars / 4)) if self.output_chars else 0
        ttft = None if self.first_token_at is None else self.first_token_at - self.started
        gen_time = total - (ttft or 0)
        data = {
            "total_time": round(total, 4),
            "time_to_first_token": None if ttft is None else round(ttft, 4),
            "input_tokens": self.input_tokens,
            "output_tokens": output,
            "tokens_estimated": estimated,
            "tokens_per_second": round(output / gen_time, 2) if output and gen_time > 0 else None,
            "route": candidate.route_id,
        }
        return Event(METRICS, {"data": data})


def stream_route(candidates: List[Candidate], request: ChatRequest, cancel: CancelToken) -> Iterator[Event]:
    """Stream one completion over ``candidates`` with fallback before output; see module doc."""
    if not candidates:
        raise NotFound("no model candidates configured")
    failures: List[str] = []
    last_error: Optional[ProviderError] = None
    for index, candidate in enumerate(candidates):
        cancel.raise_if_cancelled()
        metrics = _Metrics()
        started_output = False
        req = ChatRequest(model=candidate.model, messages=request.messages, temperature=request.temperature,
                          max_tokens=request.max_tokens, tools=request.tools, extra=request.extra)
        pending: List[Event] = []
        try:
            for event in candidate.provider.stream(req, cancel):
                metrics.observe(event)
                if not started_output:
                    if not _is_output(event):
                        pending.append(event)
                        continue
                    started_output = True
                    yield model_info(candidate)
                    if index > 0:
                        yield Event(FALLBACK, {"requested": candidates[0].route_id, "answered": candidate.route_id,
                                               "reason": "; ".join(failures)})
                    yield from pending
                    pending = []
                yield event
        except ProviderError as exc:
            if started_output or cancel.cancelled:
                raise
            failures.append(f"{candidate.route_id}: {exc.message}")
            last_error = exc
            continue
        cancel.raise_if_cancelled()
        if not started_output:
            yield model_info(candidate)
            if index > 0:
                yield Event(FALLBACK, {"requested": candidates[0].route_id, "answered": candidate.route_id,
                                       "reason": "; ".join(failures)})
            yield from pending
        yield metrics.event(candidate)
        return
    assert last_error is not None
    raise last_error


def finish_reason(events: Iterable[Event]) -> Optional[str]:
    """The last finish reason among ``events``."""
    reason = None
    for event in events:
        if event.type == FINISH:
            reason = event.data.get("reason")
    return reason
