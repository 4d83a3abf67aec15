"""What a research job asks the model, and lenient parsers for its answers.

Every prompt's system message starts with ``Task: <name>.`` (probe, plan, extract, analyze,
write), so logs and test doubles can tell the calls apart. Parsers accept JSON (bare, in a
code fence, or inside prose) and fall back to plain lines; none of them raises.
"""

from __future__ import annotations

import json
import re
from typing import Any, List, Optional

SYSTEM = "You are the research assistant of a self-hosted chat app. "


def _messages(task: str, instructions: str, user: str) -> List[dict]:
    return [{"role": "system", "content": f"Task: {task}. {SYSTEM}{instructions}"}, {"role": "user", "content": user}]


def probe() -> List[dict]:
    """A tiny call that shows the model answers at all."""
    return _messages("probe", "Answer with the single word OK.", "Are you there?")


def plan(question: str, count: int) -> List[dict]:
    """Ask for the first round's web search queries."""
    return _messages(
        "plan",
        f"Write up to {count} short, varied web search queries that together answer the "
        "research question. Answer with a JSON array of strings and nothing else.",
        f"Research question: {question}",
    )


def extract(question: str, title: str, url: str, text: str) -> List[dict]:
    """Ask for the findings one page offers on the question."""
    return _messages(
        "extract",
        "Read the page and list what it says that helps answer the research question: "
        "at most 5 short, self-contained factual statements. Answer with a JSON array "
        "of strings; answer [] when the page has nothing relevant.",
        f"Research question: {question}\nPage title: {title}\nURL: {url}\n\nPage text:\n{text}",
    )


def analyze(question: str, findings: List[dict], searched: List[str], count: int) -> List[dict]:
    """Ask whether another round of searching is needed, and with which queries."""
    listed = "\n".join(f"- {f['summary']}" for f in findings[-60:]) or "(none yet)"
    done = "\n".join(f"- {q}" for q in searched[-30:])
    return _messages(
        "analyze",
        "Decide whether the findings answer the research question well enough. Answer "
        'with a JSON object {"continue": true or false, "queries": [up to '
        f"{count} new search queries for what is still missing]}} and nothing else.",
        f"Research question: {question}\n\nQueries already searched:\n{done}\n\nFindings:\n{listed}",
    )


def write(question: str, sources: List[dict], findings: List[dict]) -> List[dict]:
    """Ask for the cited report over the numbered sources and their findings."""
    blocks = []
    for number, source in enumerate(sources, 1):
        rows = [f["summary"] for f in findings if f["url"] == source["url"]]
        lines = "\n".join(f"  - {r}" for r in rows) or "  - (read, nothing specific extracted)"
        blocks.append(f"[{number}] {source['title']} ({source['url']})\n{lines}")
    return _messages(
        "write",
        "Write a clear, well-structured report in Markdown that answers the research "
        "question using only the findings below. Cite the sources by their numbers in "
        "square brackets, like [1] or [2][3], right after the statements they support. "
        "Say plainly what the findings do not cover. Do not add a list of sources at the "
        "end: it is appended for you.",
        f"Research question: {question}\n\nSources and findings:\n" + "\n\n".join(blocks),
    )


# ---------------------------------------------------------------- parsing
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def _json_value(text: str, opener: str, closer: str) -> Optional[Any]:
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for candidate in candidates:
        start, end = candidate.find(opener), candidate.rfind(closer)
        if start < 0 or end <= start:
            continue
        try:
            return json.loads(candidate[start : end + 1])
        except ValueError:
            continue
    return None


def _clean(item: Any, limit: int) -> str:
    if isinstance(item, dict):
        item = item.get("summary") or item.get("text") or item.get("query") or ""
    text = " ".join(str(item).split()).strip(" -*•\"'")
    return text[:limit]


def string_list(text: str, limit: int, max_len: int = 500) -> List[str]:
    """Strings from a JSON array in ``text``, else from its non-empty lines (bullets and numbers dropped)."""
    value = _json_value(text, "[", "]")
    if isinstance(value, list):
        items = [_clean(v, max_len) for v in value]
    else:
        items = [_clean(re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line), max_len) for line in text.splitlines()]
    out: List[str] = []
    for item in items:
        if item and item.lower() not in {o.lower() for o in out} and item not in ("[]", "OK"):
            out.append(item)
        if len(out) >= limit:
            break
    return out


def decision(text: str, limit: int) -> Optional[dict]:
    """``{"continue": bool, "queries": [...]}`` from the analyzer's answer, or None when unreadable."""
    value = _json_value(text, "{", "}")
    if not isinstance(value, dict) or "continue" not in value:
        lowered = text.strip().lower()
        if lowered.startswith(("no", "false", "stop", "done")):
            return {"continue": False, "queries": []}
        return None
    flag = value.get("continue")
    flag = flag if isinstance(flag, bool) else str(flag).strip().lower() in ("true", "yes", "1")
    raw = value.get("queries")
    queries = raw if isinstance(raw, list) else []
    return {"continue": flag, "queries": [q for q in (_clean(v, 200) for v in queries) if q][:limit]}
