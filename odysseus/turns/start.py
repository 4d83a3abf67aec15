"""``TurnService``: the one place a ``TurnRequest`` becomes a run. No Flask.

Every entry point (the page's /api/chat_stream, the agent API, research jobs, background jobs,
and any new one) parses its input into a ``TurnRequest`` (``turns/parse.py``) and calls
``start_turn(owner, request)``, with or without an app context. In order, before anything is
stored:

1. ``resolve``: the branch (``regenerate_of``/``edit_of``: its session and message), the agent
   routing, the owner's defaults (``turns/branch.py``, ``turns/routing.py``);
2. the model route's candidates (404 for an unknown model) and the session (404 for an unknown
   or foreign id);
3. the mode's builder (``turns/registry.py``) validates its own input and prepares the turn;
4. the context sources check theirs (``odysseus.context``: attachment ids, ...);

then ``RunEngine.start`` stores and runs it (see its docstring for the order under the session lock).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, MutableMapping, Optional, Tuple, cast

from ..chats.titles import DEFAULT_TITLE, auto_title
from ..context import ContextPipeline, ContextRequest, Injection
from ..context.turn_window import TurnWindow
from ..errors import NotFound
from ..llm.llm_core import Candidate
from ..runs.engine import RunEngine, Started, StartSpec
from ..runs.run import RunContext
from ..runs.views import run_view
from ..store import Store
from . import branch
from .messages import Gather
from .parse import BACKGROUND, EntryRules, parse_turn_request
from .registry import ModeTable, PreparedTurn
from .request import TurnRequest
from .routing import route_agent, with_owner_defaults

if TYPE_CHECKING:
    from ..agent.service import AgentService
    from ..documents.service import Documents


def session_title(message: str) -> str:
    """The title of a session a turn creates: its message on one line, shortened."""
    return auto_title(message) or DEFAULT_TITLE


class TurnService:
    """One app's turns: the mode table and what every turn needs (store, engine, router, context)."""

    def __init__(self, config: Dict[str, Any], parts: MutableMapping[str, Any]):
        self.config = config
        #: the app's parts (``app.extensions``, a plain dict), read when used: a part wired (or, in a
        #: test, replaced) after this service was built is the one a turn gets
        self.parts = parts
        self.modes = ModeTable()
        #: called with (owner, request, prepared) after a mode prepared a turn, before anything is stored:
        #: a part that must add to any mode's turn does it here (the /v1 API records its response)
        self.prepared_hooks: List[Callable[[str, TurnRequest, PreparedTurn], None]] = []

    # ------------------------------------------------------------ the app's parts
    @property
    def store(self) -> Store:
        """The app's database (``odysseus.store``)."""
        return cast(Store, self.parts["odysseus.store"])

    @property
    def engine(self) -> RunEngine:
        """The run engine (``odysseus.runs``)."""
        return cast(RunEngine, self.parts["odysseus.runs"])

    @property
    def router(self) -> Any:
        """Model routes -> candidates (``llm/provider_sync.SyncedRouter``)."""
        return self.parts["odysseus.router"]

    @property
    def pipeline(self) -> ContextPipeline:
        """The context sources (``odysseus.context``)."""
        return cast(ContextPipeline, self.parts["odysseus.context"])

    @property
    def agent(self) -> "AgentService":
        """The agent's settings, tool registry and storage hooks (``agent/service.py``)."""
        return cast("AgentService", self.parts["odysseus.agent"])

    @property
    def documents(self) -> "Documents":
        """The editor documents (``documents/service.py``)."""
        return cast("Documents", self.parts["odysseus.documents"])

    # ------------------------------------------------------------ the path of a turn
    def parse(self, data: Mapping[str, Any], rules: EntryRules = BACKGROUND) -> TurnRequest:
        """``data`` (a request body) as a ``TurnRequest``, read with an entry point's rules."""
        return parse_turn_request(data, self.config, self.modes.names(), rules)

    def resolve(self, owner: str, request: TurnRequest) -> Tuple[TurnRequest, Optional[branch.BranchPlan]]:
        """The request made whole: its branch, the agent that answers, the owner's defaults."""
        request, plan = branch.plan(self.store, owner, request, int(self.config["MAX_MESSAGE_CHARS"]))
        request = route_agent(self.store, owner, request)
        return with_owner_defaults(self.store, owner, request), plan

    def prepare(self, owner: str, request: TurnRequest) -> Tuple[List[Candidate], PreparedTurn]:
        """Check the model, the session and the mode's input; the candidates and the prepared turn. Stores nothing."""
        candidates = self.router.resolve(request.model)
        if request.session_id:
            self.store.sessions.get(owner, request.session_id)  # 404 for unknown or foreign ids
        return candidates, self.modes.builder(request.mode)(self, request, candidates, owner)

    def start_turn(self, owner: str, request: TurnRequest) -> Started:
        """Start (or, for a repeated ``client_message_id``, find) the turn ``request`` describes."""
        request, plan = self.resolve(owner, request)
        candidates, prepared = self.prepare(owner, request)
        for hook in self.prepared_hooks:
            hook(owner, request, prepared)
        branch.apply(owner, plan, prepared)
        # context sources validate their input (attachment ids, ...) before anything is stored
        context_meta = self.pipeline.check(self.context_request(owner, request, request.session_id))
        user_metadata = dict(prepared.user_metadata or {}, **context_meta)
        agent = prepared.agent or request.agent
        if agent is not None:
            user_metadata["agent"] = agent.label()
        session_id = request.session_id
        if request.client_message_id and not session_id:
            # a retry whose first attempt died before the session header arrived: find that session
            session_id = self.store.messages.session_of_client_id(owner, request.client_message_id)
        return self.engine.start(
            StartSpec(
                owner=owner,
                session_id=session_id,
                mode=request.mode,
                model=candidates[0].route_id,
                make_turn=prepared.turn,
                message=prepared.message,
                user_metadata=user_metadata or None,
                client_message_id=request.client_message_id,
                terminal_type=prepared.terminal_type,
                session_title=session_title(request.message),
                in_transaction=prepared.in_transaction,
                run_id=request.run_id,
                session_origin=request.origin,
                parent_id=request.parent_message_id,
                exclusive=request.exclusive,
            )
        )

    def settle(
        self, owner: str, started: Started, timeout: Optional[float] = None
    ) -> Tuple[Dict[str, Any], Optional[Dict[str, Any]]]:
        """Wait for a started turn to end (at most ``timeout``, default the run's wall limit + 30 s); its run
        view (``runs/views.run_view``) and saved reply (None when it saved none). For callers that answer
        once, not as a stream (``POST /api/agent/chat``)."""
        row: Optional[Dict[str, Any]] = started.row
        if started.run is not None:
            limit = float(self.config["RUN_WALL_TIMEOUT"]) + 30 if timeout is None else timeout
            started.run.settled.wait(limit)
            row = self.store.runs.get(owner, started.run.run_id)
        if row is None:
            raise NotFound("the earlier request with this client_message_id left no run")
        view = run_view(row, self.engine.get(owner, row["run_id"]))
        message = self.store.messages.get(owner, view["message_id"]) if view.get("message_id") else None
        return view, message

    # ------------------------------------------------------------ what builders use
    def context_request(
        self, owner: str, request: TurnRequest, session_id: Optional[str], **more: Any
    ) -> ContextRequest:
        """The turn as the context sources see it."""
        return ContextRequest(
            owner=owner,
            session_id=session_id,
            mode=request.mode,
            message=request.message,
            data=request.extra,
            options=request.context,
            model=request.model,
            **more,
        )

    def gather(self, owner: str, request: TurnRequest) -> Gather:
        """The run-time half of the context pipeline for this request (see ``odysseus.context``)."""

        def gather(ctx: RunContext) -> List[Injection]:
            return self.pipeline.gather(self.context_request(owner, request, ctx.session_id, cancel=ctx.cancel))

        return gather

    def window(self, request: TurnRequest, candidates: List[Candidate]) -> TurnWindow:
        """The model's window of this request's route: compaction, trimming (``context/turn_window.py``)."""
        route = str(self.config.get("UTILITY_MODEL") or "").strip()
        return TurnWindow(
            self.parts["odysseus.window.book"],
            self.parts["odysseus.window.compactor"],
            candidates,
            max_tokens=request.max_tokens,
            summary_candidates=self.router.resolve(route) if route else candidates,
        )


def init_app(app: Any) -> None:
    """Create the app's turn service (the modes register into it from their own ``init_app``)."""
    app.extensions["odysseus.turns"] = TurnService(app.config, app.extensions)
