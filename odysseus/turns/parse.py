"""Reading a turn body (JSON or form fields, as a dict) into a ``TurnRequest``: one line per field.

Every entry point parses here with its ``EntryRules`` (the page's chat_stream, the agent API,
research jobs, background jobs); a new entry point picks or declares its rules, or builds a
``TurnRequest`` itself. Everything checkable without the store is checked here (a malformed
field is a ``BadRequest`` naming it); ids are looked up later, by ``TurnService.start_turn``,
before anything is stored. No Flask: background jobs parse their stored bodies the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Dict, Iterator, Mapping, Optional, Set

from ..context.options import ContextOptions
from ..errors import BadRequest
from ..research.limits import requested_limits
from ..validation import flag, optional_float, optional_str
from .request import AgentChoice, ApprovalAnswer, BranchAsk, TurnRequest

#: modes every server knows; registered modes (``TurnService.modes``) are accepted too
MODES = ("chat", "agent", "compare")
MAX_ROW_ID = 9223372036854775807  # SQLite's largest integer


@dataclass(frozen=True)
class EntryRules:
    """How one entry point reads a turn body."""

    default_mode: str = "chat"
    #: the entry point's own mode, whatever the body says (the agent API: "agent")
    mode: Optional[str] = None
    #: ``regenerate_of`` / ``edit_of`` are read (the page's chat_stream)
    branches: bool = False
    #: ``use_research: true`` makes the turn a research job
    research_switch: bool = False
    #: ``target_agent_id`` / ``agent_profile_id`` pick the agent (else the owner's default profile);
    #: an agent-mode turn is routed on every entry point, this routes the entry point's other modes too
    routing: bool = False
    #: the owner's settings fill the system prompt and temperature the body leaves out
    owner_defaults: bool = False


CHAT_STREAM = EntryRules(branches=True, research_switch=True, owner_defaults=True)
AGENT_API = EntryRules(mode="agent", research_switch=True, routing=True, owner_defaults=True)
RESEARCH_API = EntryRules(mode="research")
BACKGROUND = EntryRules()


class _Reader(Mapping[str, Any]):
    """The body, remembering which keys were read: the rest become ``TurnRequest.extra``."""

    def __init__(self, data: Mapping[str, Any]):
        self.data = data
        self.read: Set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def unread(self) -> Dict[str, Any]:
        """The fields nothing read."""
        return {k: v for k, v in self.data.items() if k not in self.read}


def parse_turn_request(
    data: Mapping[str, Any], config: Mapping[str, Any], modes: Collection[str], rules: EntryRules = BACKGROUND
) -> TurnRequest:
    """Validate a turn body into a ``TurnRequest``; raises BadRequest."""
    body = _Reader(data)
    asked = body.get("mode")
    mode = rules.mode or asked or rules.default_mode
    known = set(MODES) | set(modes)
    if not isinstance(mode, str) or mode not in known:
        raise BadRequest(f"unknown mode {mode!r}; expected one of {', '.join(sorted(known))}")
    branch = _branch(body, mode) if rules.branches else None
    approval = _approval(body)
    resume = flag(body.get("continue"))
    message = body.get("message")
    if branch is not None and branch.kind == "regenerate":
        message = ""  # the stored message answered again (turns/branch.py fills it in)
    elif mode == "agent" and message in (None, "") and (approval is not None or resume):
        message = ""  # an approval answer or "continue" may come without a message
    elif not isinstance(message, str) or not message.strip():
        raise BadRequest("message is required and must be a non-empty string")
    if len(message) > int(config["MAX_MESSAGE_CHARS"]):
        raise BadRequest("message is too long")
    if rules.research_switch and _wants_research(body):
        if mode == "compare":
            raise BadRequest("use_research cannot be combined with compare mode")
        mode = "research"
    return TurnRequest(
        message=message,
        mode=mode,
        session_id=optional_str(body, "session") or optional_str(body, "session_id"),
        model=optional_str(body, "model"),
        temperature=optional_float(body, "temperature", 0.0, 2.0),
        client_message_id=optional_str(body, "client_message_id", 200),
        max_tokens=_max_tokens(body),
        context=ContextOptions.parse(body, int(config["UPLOAD_MAX_FILES"])),
        approval=approval,
        resume=resume,
        workflow_id=_workflow_id(body),
        active_doc_id=optional_str(body, "active_doc_id", 200),
        research=requested_limits(body),
        branch=branch,
        # every agent turn is routed alike, whichever entry point: workflow > agent > profile > default
        route=_route(body) if rules.routing or mode == "agent" else None,
        owner_defaults=rules.owner_defaults,
        extra=body.unread(),
    )


def _approval(body: Mapping[str, Any]) -> Optional[ApprovalAnswer]:
    approval_id = optional_str(body, "tool_approval_id", 200)
    if approval_id is None:
        return None
    decision = body.get("tool_approval_decision")
    return ApprovalAnswer(approval_id, decision if isinstance(decision, str) else "", body.get("tool_approval_call"))


def _message_id(body: Mapping[str, Any], key: str) -> int:
    value = body.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not (1 <= value <= MAX_ROW_ID):
        raise BadRequest(f"{key} must be a message id (a positive whole number)")
    return value


def _branch(body: Mapping[str, Any], mode: str) -> Optional[BranchAsk]:
    keys = [k for k in ("regenerate_of", "edit_of") if body.get(k) is not None]
    if not keys:
        return None
    if len(keys) > 1:
        raise BadRequest("send either regenerate_of or edit_of, not both")
    if mode == "compare":
        raise BadRequest("compare mode cannot regenerate or edit; pick the reply to keep instead")
    return BranchAsk("regenerate" if keys[0] == "regenerate_of" else "edit", _message_id(body, keys[0]))


def _wants_research(body: Mapping[str, Any]) -> bool:
    """The ``use_research`` switch (true/false, or "true"/"false" from forms)."""
    value = body.get("use_research")
    if value is None or value is False or value == "":
        return False
    if value is True:
        return True
    if isinstance(value, str) and value.lower() in ("true", "1", "yes", "false", "0", "no"):
        return value.lower() in ("true", "1", "yes")
    raise BadRequest("use_research must be true or false")


def _workflow_id(body: Mapping[str, Any]) -> Optional[str]:
    value = body.get("workflow_id")
    if value in (None, ""):
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > 100:
        raise BadRequest("workflow_id must be a workflow's id (a non-empty string)")
    return value


def _max_tokens(body: Mapping[str, Any]) -> Optional[int]:
    value = body.get("max_tokens")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 1_000_000:
        raise BadRequest("max_tokens must be a whole number from 1 to 1000000")
    return value


def _route(body: Mapping[str, Any]) -> AgentChoice:
    return AgentChoice(
        target_agent_id=optional_str(body, "target_agent_id", 100),
        profile_id=optional_str(body, "agent_profile_id", 100) or optional_str(body, "profile_id", 100),
    )
