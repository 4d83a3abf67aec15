"""The report: the model's text with the numbered source list appended, or the fallback built from findings.

The fallback is deterministic (same findings, same report) and needs no model, so a job that
ran out of time, was cancelled, or whose synthesis failed still hands over everything it found.
"""

from __future__ import annotations

import re
from typing import Iterator, List, Optional
from urllib.parse import quote, urlparse

CHUNK = 400
_SOURCES_HEADING = re.compile(r"^#{1,6}\s*(sources|references)\s*$", re.I | re.M)


def _title(text: str) -> str:
    """A title safe inside a Markdown link."""
    cleaned = " ".join(str(text or "").split()).replace("[", "(").replace("]", ")")
    return cleaned.replace("*", "").replace("_", " ").replace("`", "'")[:200] or "untitled"


def _url(url: str) -> str:
    """A URL safe as a Markdown link destination."""
    return quote(url, safe=":/?#[]@!$&'()*+,;=%~-._")


def source_list(sources: List[dict]) -> str:
    """The ``## Sources`` section: ``1. [title](url) (host)`` per source, numbered as cited."""
    lines = ["## Sources", ""]
    for number, source in enumerate(sources, 1):
        host = urlparse(source["url"]).hostname or ""
        lines.append(
            f"{number}. [{_title(source.get('title') or source['url'])}]({_url(source['url'])})"
            + (f" ({host})" if host else "")
        )
    return "\n".join(lines)


def finished(text: str, sources: List[dict]) -> str:
    """The model's report with any list of sources it wrote anyway replaced by ours."""
    body = text.strip()
    match = _SOURCES_HEADING.search(body)
    if match and match.start() > len(body) // 3:
        body = body[: match.start()].rstrip()
    return body + ("\n\n" + source_list(sources) if sources else "") + "\n"


def fallback(question: str, sources: List[dict], findings: List[dict], reason: Optional[str]) -> str:
    """A report assembled from the findings alone, marked partial with ``reason``."""
    number = {s["url"]: i for i, s in enumerate(sources, 1)}
    lines = [f"# Research: {' '.join(question.split())[:300]}", ""]
    lines.append(
        f"*Partial report: {reason or 'the report could not be written'}. "
        "This lists what was found, without a written synthesis.*"
    )
    lines += ["", "## Findings", ""]
    if findings:
        for finding in findings:
            cite = f" [{number[finding['url']]}]" if finding["url"] in number else ""
            lines.append(f"- {' '.join(finding['summary'].split())}{cite}")
    else:
        lines.append("No findings were extracted" + (" from the pages that were read." if sources else "."))
    text = "\n".join(lines)
    return text + ("\n\n" + source_list(sources) if sources else "") + "\n"


def chunks(text: str, size: int = CHUNK) -> Iterator[str]:
    """The report in pieces, sent as ordinary deltas."""
    for start in range(0, len(text), size):
        yield text[start : start + size]
