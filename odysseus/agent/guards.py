"""The agent loop's guards, as pure values: limits, the loop breaker, the intent detector.

Each guard that fires ends the turn with its own event and a saved reply that says why
(see ``agent_loop``). Settings come from flat config keys so each is configurable.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import FrozenSet, List, Optional

from .approvals import canonical

DEFAULT_SYSTEM_PROMPT = (
    "You are Odysseus, an assistant that can use tools. When a tool would help, call it; "
    "you will see its result and can continue. Do not announce an action without calling the "
    "tool in the same reply. When you have what you need, answer the user directly."
)

NUDGE = (
    "You said you would take an action but did not call any tool. If you need a tool, call it now; "
    "otherwise give your final answer."
)
LAST_ROUND = (
    "You have repeated the same tool call without making progress. Do not call tools any more: "
    "answer the user now with what you have."
)


def _names(value) -> FrozenSet[str]:
    if isinstance(value, (list, tuple, set, frozenset)):
        return frozenset(str(v).strip() for v in value if str(v).strip())
    return frozenset(p.strip() for p in str(value or "").split(",") if p.strip())


@dataclass
class AgentSettings:
    """The guard limits and tool timings of one agent turn."""

    max_rounds: int = 10
    max_tool_calls: int = 30
    loop_repeats: int = 3
    max_nudges: int = 2
    approval_ttl: float = 600.0
    tool_timeout: float = 60.0
    progress_interval: float = 1.0
    output_cap: int = 20_000
    display_cap: int = 4_000  # characters of output in tool_output and saved metadata
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    approval_tools: FrozenSet[str] = field(default_factory=frozenset)
    auto_capture_citations: bool = True

    @classmethod
    def from_config(cls, config: dict) -> "AgentSettings":
        """Settings from the flat app config (see ``odysseus.config.DEFAULTS``)."""
        return cls(
            max_rounds=max(1, int(config.get("AGENT_MAX_ROUNDS", 10))),
            max_tool_calls=max(0, int(config.get("AGENT_MAX_TOOL_CALLS", 30))),
            loop_repeats=int(config.get("AGENT_LOOP_REPEATS", 3)),
            max_nudges=max(0, int(config.get("AGENT_MAX_NUDGES", 2))),
            approval_ttl=float(config.get("AGENT_APPROVAL_TTL", 600.0)),
            tool_timeout=float(config.get("TOOL_TIMEOUT", 60.0)),
            progress_interval=float(config.get("TOOL_PROGRESS_INTERVAL", 1.0)),
            output_cap=int(config.get("TOOL_OUTPUT_CAP", 20_000)),
            system_prompt=config.get("AGENT_SYSTEM_PROMPT") or DEFAULT_SYSTEM_PROMPT,
            approval_tools=_names(config.get("AGENT_APPROVAL_TOOLS")),
            auto_capture_citations=bool(config.get("CITATIONS_AUTO_CAPTURE_WEB_SEARCH", True)),
        )


def call_signature(name: str, arguments) -> str:
    """``name:hash`` of the canonical arguments: equal calls have equal signatures."""
    digest = hashlib.sha256(canonical(arguments).encode("utf-8")).hexdigest()[:16]
    return f"{name}:{digest}"


class LoopBreaker:
    """Fires when one call signature appears in ``repeats`` consecutive rounds with no new text."""

    def __init__(self, repeats: int, history: Optional[list] = None):
        self.repeats = repeats
        # [round, [signatures], new_text]; JSON-able so it survives a continuation
        self.history: List[list] = [list(h) for h in (history or [])]
        self.seen_text: set = set()

    def observe(self, round_no: int, signatures: List[str], text: str) -> Optional[dict]:
        """Record a round with tool calls; return the trigger metadata when it loops."""
        stripped = " ".join(text.split())
        new_text = bool(stripped) and stripped not in self.seen_text
        if stripped:
            self.seen_text.add(stripped)
        self.history.append([round_no, sorted(set(signatures)), new_text])
        if self.repeats < 2 or len(self.history) < self.repeats:
            return None
        window = self.history[-self.repeats :]
        rounds = [w[0] for w in window]
        if rounds != list(range(rounds[0], rounds[0] + self.repeats)):
            return None  # not consecutive (a round without tools came between)
        common = set(window[0][1]).intersection(*[set(w[1]) for w in window[1:]])
        if not common or any(w[2] for w in window[1:]):
            return None
        signature = sorted(common)[0]
        return {"signature": signature, "tool": signature.split(":", 1)[0], "repeats": self.repeats, "rounds": rounds}

    def reset_streak(self) -> None:
        """A round without tool calls breaks any streak."""
        self.history.append([-1, [], True])


_INTENT = re.compile(
    r"\b(let me(?! know)|let's|i'll|i will|i am going to|i'm going to|i need to|i should|next,? i|now i)\b"
    r"[^.!?\n]{0,80}?\b(search|look|check|run|execute|fetch|open|browse|find|call|use|try|calculate|"
    r"compute|generate|create|write|read|test|verify|query|download|install|inspect)",
    re.IGNORECASE,
)


def announces_action(text: str) -> bool:
    """True when the end of ``text`` promises an action (``Let me search for ...``)."""
    tail = text.strip()[-300:]
    if not tail:
        return False
    last = re.split(r"(?<=[.!?])\s+(?=[A-Z])", tail)[-1] if not tail.endswith(":") else tail
    return bool(_INTENT.search(last)) or (tail.endswith(":") and bool(_INTENT.search(tail)))


_SECRETS = [
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 [redacted]"),
    (re.compile(r"\b(sk|pk|rk|xox[abp])-[A-Za-z0-9_-]{6,}"), "[redacted]"),
    (re.compile(r"(?i)\b(api[_-]?key|token|secret|password)\b\s*[:=]\s*\S+"), r"\1 [redacted]"),
]


def sanitize(message: str, limit: int = 300) -> str:
    """An error message safe to store and show: secrets masked, provider bodies cut short."""
    text = " ".join(str(message or "").split())
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    if "{" in text:  # a raw JSON body pasted into the message: keep only what precedes it
        text = text.split("{", 1)[0].rstrip(" :") + " [provider body omitted]"
    return text[:limit]
