"""Research mode: the ``research`` builder, and the job rows kept in step with the runs.

A research job is a run of the run engine in mode ``research``; its job id is the run id.
The job row (``store.research``) is written when the run starts and completed when it
finishes, from the run's own record (the engine's ``run_started`` / ``run_finished``), so the
job list and results stay right however the run was started (the research API, a chat turn
with ``use_research: true``, the agent API) and however it ended.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List

from ..errors import BadRequest
from ..events import CHAT_TERMINAL
from ..llm.llm_core import Candidate
from ..research import report
from ..research.limits import ResearchLimits
from ..research.pages import backend_problem
from ..research.turn import research_turn
from ..sse import JOB_STATUS
from .registry import PreparedTurn, register_mode
from .request import TurnRequest

if TYPE_CHECKING:
    from ..runs.run import Run
    from .start import TurnService

MAX_QUESTION_CHARS = 4000


def build_research_turn(
    turns: "TurnService", request: TurnRequest, candidates: List[Candidate], owner: str
) -> PreparedTurn:
    """Validate a research request (question, limits, search backend); store nothing."""
    config = turns.config
    question = " ".join(request.message.split())
    if len(question) > MAX_QUESTION_CHARS:
        raise BadRequest(f"the research question is longer than {MAX_QUESTION_CHARS} characters")
    problem = backend_problem(config)
    if problem:
        raise BadRequest(problem, reason="unavailable")
    limits = ResearchLimits.from_request(config, request.research)
    settings = dict(config)
    return PreparedTurn(
        request.message,
        request.client_message_id,
        lambda history: research_turn(candidates, question, limits, settings),
        terminal_type=CHAT_TERMINAL,
        user_metadata={"research": {"limits": limits.to_dict()}},
    )


class ResearchJobs:
    """Keeps ``store.research`` in step with the research runs of one app."""

    def __init__(self, store: Any, engine: Any):
        self.store = store
        self.manager = engine

    def started(self, run: "Run") -> None:
        """A research run started: record its job."""
        if run.mode != "research":
            return
        query = ""
        if run.user_message_id is not None:
            query = self.store.messages.get(run.owner, run.user_message_id)["content"]
        self.store.research.create(run.run_id, run.owner, run.session_id, query)

    def finished(self, run: "Run") -> None:
        """A research run ended: save its result with the job."""
        if run.mode != "research":
            return
        metadata = run.context.metadata if run.context is not None else {}  # set once a run has started
        state = metadata.get("research") or {}
        sources, findings = state.get("sources") or [], state.get("findings") or []
        partial = run.status != "done" or bool(state.get("partial"))
        text = run.content
        if not text.strip() and (sources or findings):  # stopped before its last event got in
            text = report.fallback(state.get("query") or "", sources, findings, run.stop_reason or run.status)
        self.store.research.finish(
            run.run_id,
            JOB_STATUS.get(run.status, "error"),
            message_id=run.message_id,
            report=text,
            sources=sources,
            findings=findings,
            stats=state.get("stats") or {},
            partial=partial,
            error=run.error,
        )

    def forget_session(self, owner: str, session_id: str, **_: Any) -> None:
        """A session was deleted: its jobs go with it."""
        self.store.research.delete_session(owner, session_id)


def init_app(app: Any) -> None:
    """Register research mode and keep the job rows in step with the runs."""
    ext = app.extensions
    engine = ext["odysseus.runs"]
    jobs = ext["odysseus.research"] = ResearchJobs(ext["odysseus.store"], engine)
    engine.hooks.run_started.connect(jobs.started)
    engine.hooks.run_finished.connect(jobs.finished)
    engine.hooks.session_deleted.connect(jobs.forget_session)
    register_mode(app, "research", build_research_turn)
