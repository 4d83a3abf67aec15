"""The research turn: a multi-round web research job as one generator of canonical events.

Phases, each announced as ``research_progress {"data": {"phase", ...}}``: ``probing``,
``planning``, then per round ``searching``, ``reading`` (one per page read) and ``analyzing``,
then ``writing``; ``warning`` and ``error`` may come at any time. Then ``research_sources``,
``research_findings``, the report as ordinary deltas, and ``research_done``.

Invariants:

- ``ctx.metadata["research"]`` is current after every step (sources, findings, progress,
  stats), so even a run finalized from outside saves what was found.
- Whatever ends the job, a report is written from what was found: by the model when it can,
  else the deterministic ``report.fallback``, and marked partial. A stop (cancel, replaced,
  the run's watchdog) leaves room for exactly one more event, so then the whole fallback
  report goes out as one delta.
- Time: searching and reading end ``write_reserve`` seconds before ``max_time`` (the job's
  own token is cancelled with reason ``research_time``); writing gets what is left.
- Every model call has its own limit (``ResearchLimits.timeout_for``), and every wait
  re-announces its phase each ``progress_interval`` seconds.
"""

from __future__ import annotations

import functools
import queue
import threading
import time
from typing import Any, Callable, Dict, Generator, Iterator, List, Optional, TypeVar

from ..cancel import Cancelled, CancelToken
from ..errors import OdysseusError, ProviderError
from ..events import RESEARCH_DONE, RESEARCH_FINDINGS, RESEARCH_PROGRESS, RESEARCH_SOURCES, Event, delta
from ..llm.llm_core import Candidate
from ..runs.run import RunContext
from ..tools.registry import ToolError
from . import prompts, report
from .limits import ResearchLimits, is_local
from .model import POLL, CallTimeout, ResearchFailed, ask, child_token, wait_on
from .pages import new_pages, read_concurrently, read_text, search

T = TypeVar("T")

TIME_UP = "research_time"
EXCERPT = 400


def research_turn(candidates: List[Candidate], question: str, limits: ResearchLimits, config: dict):
    """Return the turn generator function of one research job for the run engine."""

    def turn(ctx: RunContext) -> Iterator[Event]:
        yield from ResearchJob(candidates, question, limits, config, ctx).run()

    return turn


def _chars(messages: List[dict]) -> int:
    return sum(len(m.get("content") or "") for m in messages)


class ResearchJob:
    """The state of one job while it runs: what was searched, read and found."""

    def __init__(
        self,
        candidates: List[Candidate],
        question: str,
        limits: ResearchLimits,
        config: dict,
        ctx: RunContext,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.candidates, self.question, self.limits, self.config, self.ctx = candidates, question, limits, config, ctx
        self.clock = clock
        self.started = clock()
        self.deadline = self.started + limits.max_time
        self.research_deadline = self.deadline - limits.write_reserve
        self.local = is_local(candidates[0].provider)
        self.sources: List[dict] = []
        self.findings: List[dict] = []
        self.seen: Dict[str, bool] = {}
        self.searched: List[str] = []
        self.warnings: List[str] = []
        self.row: dict = {}
        self.chars_written = 0
        self.stats: Dict[str, Any] = {
            "rounds": 0,
            "queries": 0,
            "pages_read": 0,
            "pages_failed": 0,
            "model_calls": 0,
            "ended_by": None,
        }
        self.token: CancelToken = CancelToken()

    # ---------------------------------------------------------------- state and events
    def publish(self, **extra) -> None:
        """Put the current state where the engine saves it with the reply."""
        state = self.ctx.metadata.get("research") or {}
        state.update(
            {
                "job_id": self.ctx.run_id,
                "session_id": self.ctx.session_id,
                "query": self.question,
                "sources": list(self.sources),
                "findings": list(self.findings),
                "progress": dict(self.row),
                "stats": {**self.stats, "elapsed_s": round(self.clock() - self.started, 1)},
                "limits": self.limits.to_dict(),
                "warnings": self.warnings[-20:],
            }
        )
        state.update(extra)
        self.ctx.metadata["research"] = state

    def progress(self, phase: str, **fields) -> Event:
        """A phase update (kept as the job's current progress)."""
        self.row = {"phase": phase, **fields}
        self.publish()
        return Event(RESEARCH_PROGRESS, {"data": dict(self.row)})

    def warning(self, message: str) -> Event:
        """Something went wrong that the job works around."""
        self.warnings.append(message)
        self.publish()
        return Event(RESEARCH_PROGRESS, {"data": {"phase": "warning", "message": message}})

    def beat(self, waited: float) -> Event:
        """The current phase again, while a wait goes on (keeps the run's idle watchdog away)."""
        fields = {k: v for k, v in self.row.items() if k not in ("phase", "waiting", "chars")}
        if self.row.get("phase") == "writing" and self.chars_written:
            fields["chars"] = self.chars_written
        return self.progress(self.row.get("phase", "working"), **fields, waiting=round(waited, 1))

    def wait(self, work: Callable[[], T], token: CancelToken) -> Generator[Event, None, T]:
        """``yield from`` this to run blocking ``work`` while staying responsive."""
        return wait_on(work, token, self.limits.progress_interval, self.beat)

    def call(self, messages: List[dict], token: CancelToken, deadline: float) -> Generator[Event, None, str]:
        """One bounded model call from the turn (``text = yield from self.call(...)``)."""
        token.raise_if_cancelled()
        timeout = min(self.limits.timeout_for(_chars(messages), self.local), deadline - self.clock())
        if timeout < 1.0:
            raise CallTimeout("no time was left for the model")
        self.stats["model_calls"] += 1
        return (
            yield from self.wait(lambda: ask(self.candidates, messages, token, timeout, on_text=self._count), token)
        )

    def _count(self, size: int) -> None:
        self.chars_written = size

    # ---------------------------------------------------------------- the job
    def run(self) -> Iterator[Event]:
        """Research, then write; see the module docstring for what ends it and how."""
        self.token, unlink = child_token(self.ctx.cancel)
        timer = threading.Timer(max(0.0, self.research_deadline - self.clock()), self.token.cancel, args=(TIME_UP,))
        timer.daemon = True
        timer.start()
        try:
            time_up = False
            try:
                yield from self.until_stopped(self.research())
            except Cancelled:
                if self.ctx.cancel.cancelled:
                    yield from self.stopped()
                    return
                time_up = True
                self.stats["ended_by"] = "time"
                yield self.warning(
                    f"the time limit ({self.limits.max_time:.0f} s) ended the research; "
                    "the report is written from what was found"
                )
            except ResearchFailed as exc:
                yield self.progress("error", message=exc.message)
                raise
            except Exception as exc:
                yield self.progress("error", message=getattr(exc, "message", None) or "internal error")
                if self.findings or self.sources:
                    yield from self.deliver(
                        report.fallback(
                            self.question, self.sources, self.findings, "the research failed before the report"
                        ),
                        True,
                        "error",
                    )
                raise
            try:
                yield from self.until_stopped(self.write(time_up))
            except Cancelled:
                if self.ctx.cancel.cancelled:
                    yield from self.stopped()
                    return
                raise
        finally:
            timer.cancel()
            unlink()

    def until_stopped(self, events: Iterator[Event]) -> Iterator[Event]:
        """Pass ``events`` on until the run is stopped: then only the final report may follow."""
        try:
            for event in events:
                if self.ctx.cancel.cancelled:
                    raise Cancelled(self.ctx.cancel.reason or "stopped")
                yield event
        finally:
            close = getattr(events, "close", None)
            if close:
                close()

    def stopped(self) -> Iterator[Event]:
        """The run is being stopped: one last event, the whole report built from the findings."""
        reason = self.ctx.cancel.reason or "stopped"
        words = "the job was cancelled" if reason in ("stopped", "cancelled") else f"the job was stopped ({reason})"
        self.stats["ended_by"] = "cancelled"
        self.publish(partial=True, partial_reason=words)
        self.ctx.terminal["research"] = {"partial": True, "reason": words}
        yield delta(report.fallback(self.question, self.sources, self.findings, words))

    def research(self) -> Iterator[Event]:
        """Probing, planning and the rounds; raises Cancelled when time is up or the job stops."""
        yield self.progress("probing")
        try:
            seed = yield from self.wait(
                lambda: search(self.question, self.config, self.token, self.limits.pages_per_round), self.token
            )
        except ToolError as exc:
            raise ResearchFailed(f"the search backend does not answer: {exc}") from None
        try:
            yield from self.call(prompts.probe(), self.token, self.research_deadline)
        except (ProviderError, CallTimeout) as exc:
            raise ResearchFailed(f"the model does not answer: {exc.message}") from None
        yield self.progress("planning")
        queries: List[str] = []
        try:
            answer = yield from self.call(
                prompts.plan(self.question, self.limits.queries_per_round), self.token, self.research_deadline
            )
            queries = prompts.string_list(answer, self.limits.queries_per_round, 200)
        except (ProviderError, CallTimeout) as exc:
            yield self.warning(f"the model could not plan the searches ({exc.message}); searching for the question")
        yield from self.rounds(queries or [self.question], seed)

    def rounds(self, queries: List[str], seed: List[dict]) -> Iterator[Event]:
        """Search, read and analyze until a limit, two rounds without findings, or the model stops it."""
        limits, empty, number = self.limits, 0, 0
        while True:
            self.token.raise_if_cancelled()
            number += 1
            self.stats["rounds"] = number
            yield self.progress("searching", round=number, queries=list(queries), total_sources=len(self.sources))
            rows = list(seed)
            seed = []
            for query in queries:
                if query.lower() in {q.lower() for q in self.searched}:
                    continue
                self.searched.append(query)
                self.stats["queries"] += 1
                try:
                    rows += yield from self.wait(
                        functools.partial(search, query, self.config, self.token, limits.pages_per_round), self.token
                    )
                except ToolError as exc:
                    yield self.warning(f"search failed for {query!r}: {exc}")
            before = len(self.findings)
            pages = list(new_pages(rows, self.seen, limits.pages_per_round))
            if pages:
                yield from self.read(number, pages)
            added = len(self.findings) - before
            empty = 0 if added else empty + 1
            yield self.progress("analyzing", round=number, total_findings=len(self.findings), new_findings=added)
            if number >= limits.round_cap:
                self.stats["ended_by"] = "max_rounds" if limits.max_rounds else "round_cap"
                return
            if empty >= 2:
                self.stats["ended_by"] = "no_new_findings"
                return
            verdict = None
            try:
                answer = yield from self.call(
                    prompts.analyze(self.question, self.findings, self.searched, limits.queries_per_round),
                    self.token,
                    self.research_deadline,
                )
                verdict = prompts.decision(answer, limits.queries_per_round)
            except (ProviderError, CallTimeout) as exc:
                yield self.warning(f"the model could not judge the findings ({exc.message})")
            if verdict is None:
                verdict = {"continue": added > 0, "queries": []}
            if not verdict["continue"] and number >= limits.min_rounds:
                self.stats["ended_by"] = "model_done"
                return
            queries = verdict["queries"] or self.follow_ups()

    def follow_ups(self) -> List[str]:
        """Queries for another round when the model named none."""
        words = ("explained", "evidence", "latest", "overview", "criticism", "examples")
        fresh = [
            f"{self.question} {w}"
            for w in words
            if f"{self.question} {w}".lower() not in {q.lower() for q in self.searched}
        ]
        return fresh[: self.limits.queries_per_round] or [self.question]

    # ---------------------------------------------------------------- reading
    def read_page(self, page: dict) -> dict:
        """Fetch one page and extract its findings (runs in a reader worker; never raises)."""
        try:
            url, title, text = read_text(page["url"], self.config, self.token)
        except ToolError as exc:
            return {"page": page, "error": str(exc)}
        except Cancelled:
            return {"page": page, "skipped": True}
        title = " ".join((title or page.get("title") or url).split())[:300]
        text = text[: self.limits.chars_per_page]
        result = {"page": page, "url": url, "title": title, "findings": [], "excerpt": False, "calls": 0}
        if not text.strip():
            return result
        messages = prompts.extract(self.question, title, url, text)
        timeout = min(self.limits.timeout_for(_chars(messages), self.local), self.research_deadline - self.clock())
        try:
            if timeout < 1.0:
                raise CallTimeout("no time was left for the model")
            result["calls"] = 1
            result["findings"] = prompts.string_list(ask(self.candidates, messages, self.token, timeout), 5)
        except (Cancelled, CallTimeout, ProviderError, OdysseusError) as exc:
            # The page was read: keep an excerpt of it rather than nothing.
            result.update(findings=[" ".join(text.split())[:EXCERPT]], excerpt=True)
            if not isinstance(exc, Cancelled):
                result["warning"] = (
                    f"could not extract findings from {url} ({getattr(exc, 'message', exc)}); kept an excerpt"
                )
        return result

    def read(self, number: int, pages: List[dict]) -> Iterator[Event]:
        """Read ``pages`` concurrently; one ``reading`` event per page read, as they finish."""
        done = read_concurrently(pages, self.read_page, self.limits.concurrent_reads, self.token)
        counter = {"new": 0}
        waited = since_beat = 0.0
        for left in range(len(pages), 0, -1):
            while True:
                try:
                    result = done.get(timeout=POLL)
                except queue.Empty:
                    result = None
                if self.token.cancelled:  # time is up or the job stops: keep what is in, quietly
                    yield from self.drain(number, done, counter, [result] if result else [], left)
                    raise Cancelled(self.token.reason or "stopped")
                if result is not None:
                    break
                waited += POLL
                since_beat += POLL
                if since_beat >= self.limits.progress_interval:
                    since_beat = 0.0
                    yield self.beat(waited)
            yield from self.fold(number, result, counter)

    def drain(self, number: int, done: "queue.Queue", counter: dict, got: List[dict], left: int) -> Iterator[Event]:
        """After a cancel or time-up: keep the pages that finish within a short grace (failures unreported)."""
        grace = self.clock() + 2.0
        while len(got) < left and self.clock() < grace:
            try:
                got.append(done.get(timeout=POLL))
            except queue.Empty:
                continue
        for result in got:
            events = [e for e in self.fold(number, result, counter, quiet=True)]
            if not self.ctx.cancel.cancelled:  # time is up but the run goes on: show them
                yield from events

    def fold(self, number: int, result: dict, counter: dict, quiet: bool = False) -> Iterator[Event]:
        """Add one page's result to the job's state."""
        if result.get("skipped"):
            return
        page = result["page"]
        if result.get("error"):
            if not quiet:
                self.stats["pages_failed"] += 1
                yield self.warning(f"could not read {page['url']}: {result['error']}")
            return
        self.stats["model_calls"] += result.get("calls", 0)
        url = result["url"]
        self.seen[url] = True
        if any(s["url"] == url for s in self.sources):
            return  # a redirect led to a page already read
        self.sources.append({"url": url, "title": result["title"]})
        self.stats["pages_read"] += 1
        counter["new"] += 1
        for summary in result["findings"]:
            finding = {"url": url, "title": result["title"], "summary": summary}
            if result.get("excerpt"):
                finding["excerpt"] = True
            self.findings.append(finding)
        if result.get("warning"):
            yield self.warning(result["warning"])
        yield self.progress(
            "reading",
            round=number,
            url=url,
            title=result["title"],
            new_sources=counter["new"],
            total_sources=len(self.sources),
            total_findings=len(self.findings),
        )

    # ---------------------------------------------------------------- writing
    def write(self, time_up: bool) -> Iterator[Event]:
        """The cited report by the model, else the fallback; then the final rows and the report."""
        reason: Optional[str] = "the time limit was reached" if time_up else None
        yield self.progress("writing", total_sources=len(self.sources))
        text = None
        if not self.findings:
            reason = reason or "nothing relevant was found"
            yield self.warning("no findings were extracted, so there is nothing to write a report from")
        else:
            token, unlink = child_token(self.ctx.cancel)
            try:
                answer = yield from self.call(
                    prompts.write(self.question, self.sources, self.findings), token, self.deadline
                )
                text = answer if answer.strip() else None
                if text is None:
                    yield self.warning("the model wrote an empty report; it was assembled from the findings")
            except (ProviderError, CallTimeout) as exc:
                yield self.warning(
                    f"the report could not be written ({exc.message}); it was assembled from the findings"
                )
            finally:
                unlink()
        if text is None:
            final = report.fallback(
                self.question, self.sources, self.findings, reason or "the model could not write the report"
            )
            yield from self.deliver(final, True, reason or "the model could not write the report")
        else:
            yield from self.deliver(report.finished(text, self.sources), time_up, reason)

    def deliver(self, text: str, partial: bool, reason: Optional[str]) -> Iterator[Event]:
        """The final rows, the report as deltas, and ``research_done``."""
        self.stats["ended_by"] = self.stats["ended_by"] or "done"
        self.publish(partial=partial, partial_reason=reason)
        self.ctx.terminal["research"] = {"partial": partial, "reason": reason}
        yield Event(RESEARCH_SOURCES, {"data": list(self.sources)})
        yield Event(RESEARCH_FINDINGS, {"data": list(self.findings)})
        for piece in report.chunks(text):
            yield delta(piece)
        yield Event(RESEARCH_DONE, {"data": {"job_id": self.ctx.run_id, "session_id": self.ctx.session_id}})
