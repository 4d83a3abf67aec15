"""The bounds of one research job: from config (trusted) and the request (validated)."""

from __future__ import annotations

import ipaddress
import math
from dataclasses import asdict, dataclass
from typing import Any, Dict, Mapping, Optional
from urllib.parse import urlparse

from ..errors import BadRequest

#: request field -> (config key, lowest, highest, type)
REQUEST_FIELDS = {
    "max_rounds": ("RESEARCH_MAX_ROUNDS", 0, 20, int),
    "min_rounds": ("RESEARCH_MIN_ROUNDS", 0, 20, int),
    "max_time": ("RESEARCH_MAX_TIME", 60, 3600, float),
    "pages_per_round": ("RESEARCH_PAGES_PER_ROUND", 1, 20, int),
    "chars_per_page": ("RESEARCH_CHARS_PER_PAGE", 500, 50_000, int),
    "concurrent_reads": ("RESEARCH_CONCURRENT_READS", 1, 8, int),
}
HARD_MAX_ROUNDS = 20


def _number(data: Mapping[str, Any], key: str, low: float, high: float, kind: type) -> Optional[Any]:
    """A numeric request field within [low, high] (form strings parsed), or None when absent."""
    value = data.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise BadRequest(f"{key} must be a number")
    try:
        number = float(value)
    except (ValueError, OverflowError):
        raise BadRequest(f"{key} must be a number") from None
    if not math.isfinite(number):
        raise BadRequest(f"{key} must be a finite number")
    if kind is int and not number.is_integer():
        raise BadRequest(f"{key} must be an integer")
    if not (low <= number <= high):
        raise BadRequest(f"{key} must be between {low} and {high}")
    return kind(number)


def requested_limits(data: Mapping[str, Any]) -> Dict[str, Any]:
    """The limits a request body asks for (``REQUEST_FIELDS``), validated; absent ones left out."""
    out: Dict[str, Any] = {}
    for key, (_, low, high, kind) in REQUEST_FIELDS.items():
        value = _number(data, key, low, high, kind)
        if value is not None:
            out[key] = value
    return out


@dataclass(frozen=True)
class ResearchLimits:
    """How far one job may go; every wait and call is bounded by these."""

    max_rounds: int = 0  # 0 = automatic: the model decides, up to auto_rounds
    auto_rounds: int = 6
    min_rounds: int = 1
    max_time: float = 600.0
    write_share: float = 0.2
    queries_per_round: int = 3
    pages_per_round: int = 5
    chars_per_page: int = 6000
    concurrent_reads: int = 3
    call_timeout: float = 90.0
    timeout_per_kchar: float = 1.0
    local_factor: float = 3.0
    progress_interval: float = 10.0

    @property
    def round_cap(self) -> int:
        """The most rounds this job runs."""
        return min(HARD_MAX_ROUNDS, self.max_rounds or self.auto_rounds)

    @property
    def write_reserve(self) -> float:
        """Seconds at the end of ``max_time`` kept for writing the report."""
        return self.max_time * self.write_share

    def timeout_for(self, prompt_chars: int, local: bool) -> float:
        """The time one model call may take: a base, plus per prompt size, times the local factor."""
        seconds = self.call_timeout + self.timeout_per_kchar * prompt_chars / 1000.0
        return seconds * (self.local_factor if local else 1.0)

    def to_dict(self) -> dict:
        """The limits as JSON (saved with the job)."""
        return asdict(self)

    @classmethod
    def from_request(cls, config: dict, data: Optional[Mapping[str, Any]] = None) -> "ResearchLimits":
        """Config defaults overridden by validated request fields; raises BadRequest."""
        data = data or {}
        values: Dict[str, Any] = {
            "max_rounds": int(config.get("RESEARCH_MAX_ROUNDS", 0)),
            "auto_rounds": max(1, min(HARD_MAX_ROUNDS, int(config.get("RESEARCH_AUTO_ROUNDS", 6)))),
            "min_rounds": int(config.get("RESEARCH_MIN_ROUNDS", 1)),
            "max_time": float(config.get("RESEARCH_MAX_TIME", 600.0)),
            "write_share": min(0.9, max(0.0, float(config.get("RESEARCH_WRITE_SHARE", 0.2)))),
            "queries_per_round": max(1, int(config.get("RESEARCH_QUERIES_PER_ROUND", 3))),
            "pages_per_round": int(config.get("RESEARCH_PAGES_PER_ROUND", 5)),
            "chars_per_page": int(config.get("RESEARCH_CHARS_PER_PAGE", 6000)),
            "concurrent_reads": int(config.get("RESEARCH_CONCURRENT_READS", 3)),
            "call_timeout": float(config.get("RESEARCH_CALL_TIMEOUT", 90.0)),
            "timeout_per_kchar": float(config.get("RESEARCH_TIMEOUT_PER_KCHAR", 1.0)),
            "local_factor": max(1.0, float(config.get("RESEARCH_LOCAL_FACTOR", 3.0))),
            "progress_interval": max(0.05, float(config.get("RESEARCH_PROGRESS_INTERVAL", 10.0))),
        }
        for key, (_, low, high, kind) in REQUEST_FIELDS.items():
            value = _number(data, key, low, high, kind)
            if value is not None:
                values[key] = value
        values["max_rounds"] = max(0, min(HARD_MAX_ROUNDS, values["max_rounds"]))
        values["pages_per_round"] = max(1, values["pages_per_round"])
        values["chars_per_page"] = max(200, values["chars_per_page"])
        values["concurrent_reads"] = max(1, values["concurrent_reads"])
        # A run ends at the engine's wall limit whatever the job wants: finish (and write) before it.
        wall = float(config.get("RUN_WALL_TIMEOUT", 1800.0))
        values["max_time"] = max(1.0, min(values["max_time"], wall - min(30.0, wall * 0.1)))
        limits = cls(**values)
        if limits.max_rounds and limits.min_rounds > limits.max_rounds:
            raise BadRequest("min_rounds cannot be more than max_rounds")
        return limits


def is_local(provider: Any) -> bool:
    """True for models that usually run on this machine or network (slower: longer timeouts)."""
    if getattr(provider, "kind", "") == "ollama":
        return True
    host = urlparse(str(getattr(provider, "base_url", "") or "")).hostname or ""
    if host in ("localhost",) or host.endswith(".local"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local
