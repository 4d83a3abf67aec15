"""llm_core: route resolution, fallback between candidates, and metrics.

A *route* is an ordered list of candidates ``(provider, model)``. ``stream_route``
tries them in order; the next candidate is tried only when the current one fails
before any real output (a content, reasoning or tool-call event). Once output has
started the error is raised, never retried elsewhere, so text is never duplicated.

Events yielded, in order: ``model_info`` (the candidate actually used), possibly
``fallback`` (right after it, when a backup answered), the provider's deltas and
tool calls, ``usage``, then ``metrics``. When the answering candidate fails after its
output started, a ``metrics`` event marked ``partial`` is yielded before the error is raised.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, Iterable, Iterator, List, Optional

from ..cancel import CancelToken
from ..errors import NotFound, ProviderError
from ..events import DELTA, FALLBACK, MODEL_INFO, TOOL_CALL, TOOL_CALL_DELTA, Event
from .base import ChatRequest, Provider
from .demo import DEMO_LABEL, DEMO_MODEL
from .metrics import CompletionMetrics, message_chars


@dataclass(frozen=True)
class Candidate:
    """One (provider, model) pair of a route."""

    provider: Provider
    model: str

    @property
    def route_id(self) -> str:
        """``provider/model``: how routes are named in events and config."""
        return f"{self.provider.name}/{self.model}"

    @property
    def price(self) -> Optional[dict]:
        """The ``[prices]`` entry for this model, when configured."""
        return (getattr(self.provider, "prices", None) or {}).get(self.model)


class ModelRouter:
    """Resolves a requested model name to the candidates of its route."""

    def __init__(
        self, providers: Iterable[Provider], routes: Optional[Dict[str, List[str]]] = None, default_model: str = ""
    ):
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
            for provider in self.providers.values():  # only configured lists: no network here
                if spec in (getattr(provider, "configured_models", None) or []):
                    return Candidate(provider, spec)
            raise NotFound(f"unknown model {spec!r}: name it as provider/model")
        if not model:
            model = getattr(provider, "default_model", None) or ""
            if not model:
                model = (provider.list_models() or [""])[0]
                if model:
                    provider.default_model = model  # ask the server once, not on every request
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
    data: Dict[str, object] = {
        "provider": candidate.provider.name,
        "model": candidate.model,
        "route": candidate.route_id,
    }
    if candidate.provider.kind == "demo":
        data.update({"model": DEMO_MODEL, "label": DEMO_LABEL, "offline_demo": True})
    else:
        data["label"] = candidate.route_id
    return Event(MODEL_INFO, data)


def _is_output(event: Event) -> bool:
    return event.type in (DELTA, TOOL_CALL, TOOL_CALL_DELTA)  # streamed tool arguments are output: no holding back


def _fallback(candidates: List[Candidate], answering: Candidate, failures: List[dict]) -> Event:
    return Event(
        FALLBACK,
        {
            "requested": candidates[0].route_id,
            "answered": answering.route_id,
            "reason": "; ".join(f"{f['route']}: {f['error']}" for f in failures),
            "failures": failures,
        },
    )


def stream_route(candidates: List[Candidate], request: ChatRequest, cancel: CancelToken) -> Iterator[Event]:
    """Stream one completion over ``candidates`` with fallback before output; see module doc."""
    if not candidates:
        raise NotFound("no model candidates configured")
    failures: List[dict] = []
    last_error: Optional[ProviderError] = None
    input_chars = message_chars(request.messages, request.tools)
    for index, candidate in enumerate(candidates):
        cancel.raise_if_cancelled()
        metrics = CompletionMetrics(input_chars, candidate.price)
        started_output = False
        pending: List[Event] = []
        try:
            for event in candidate.provider.stream(replace(request, model=candidate.model), cancel):
                if started_output and event.type == DELTA and metrics.first_token_at is not None:
                    metrics.output_chars += len(event.data.get("delta", ""))  # observe's count, without the call
                    yield event
                    continue
                metrics.observe(event)
                if not started_output:
                    if not _is_output(event):
                        pending.append(event)  # held back: a failure before output discards it
                        continue
                    started_output = True
                    yield model_info(candidate)
                    if index > 0:
                        yield _fallback(candidates, candidate, failures)
                    yield from pending
                    pending = []
                yield event
        except ProviderError as exc:
            if cancel.cancelled:
                raise
            if started_output:
                yield metrics.event(candidate.route_id, partial=True)  # what the partial cost
                raise
            failures.append({"route": candidate.route_id, "error": exc.message, "status": exc.status})
            last_error = exc
            continue
        cancel.raise_if_cancelled()
        if not started_output:
            yield model_info(candidate)
            if index > 0:
                yield _fallback(candidates, candidate, failures)
            yield from pending
        yield metrics.event(candidate.route_id)
        return
    assert last_error is not None
    if len(failures) > 1:  # say what every candidate did; keep the last one's status and retry hint
        raise type(last_error)(
            "All candidates failed: " + "; ".join(f"{f['route']}: {f['error']}" for f in failures),
            status=last_error.status,
            retry_after=last_error.retry_after,
            provider=last_error.provider,
        )
    raise last_error
