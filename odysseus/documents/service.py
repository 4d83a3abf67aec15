"""Documents as the REST routes and the model's tools both use them: validation, limits, edits, events.

Everything is owner-scoped (the repository filters by owner; a foreign id is NotFound).
Rejected input raises before anything is stored: an over-long title, an unknown field
type, content over ``DOCUMENT_MAX_BYTES`` (``PayloadTooLarge``). Languages come from
one fixed list; anything else becomes ``text``.
"""

from __future__ import annotations

from typing import Iterable, List, Optional, Tuple

from ..errors import BadRequest, PayloadTooLarge
from ..events import DOC_SUGGESTIONS, DOC_UPDATE, Event

LANGUAGES = (
    "python",
    "javascript",
    "typescript",
    "html",
    "css",
    "markdown",
    "json",
    "yaml",
    "bash",
    "sql",
    "rust",
    "go",
    "java",
    "c",
    "cpp",
    "xml",
    "toml",
    "csv",
    "text",
)
TITLE_MAX = 200
SUMMARY_MAX = 500
MAX_EDITS = 200


def normalise_language(value) -> str:
    """A language from ``LANGUAGES`` (case-insensitive); anything else is ``text``."""
    name = value.strip().lower() if isinstance(value, str) else ""
    return name if name in LANGUAGES else "text"


def clean_title(value) -> str:
    """A non-empty title of at most ``TITLE_MAX`` characters (one line)."""
    if not isinstance(value, str) or not value.strip():
        raise BadRequest("title is required and must be a non-empty string")
    title = " ".join(value.split())
    if len(title) > TITLE_MAX:
        raise BadRequest(f"title is longer than {TITLE_MAX} characters")
    return title


def doc_update_event(doc: dict) -> Event:
    """``doc_update`` for an accepted write."""
    return Event(
        DOC_UPDATE,
        {
            "doc_id": doc["id"],
            "content": doc["content"],
            "version": doc["version_count"],
            "title": doc["title"],
            "language": doc["language"],
        },
    )


def public(doc: dict) -> dict:
    """A document as the API shows it."""
    return {
        "id": doc["id"],
        "session_id": doc.get("session_id"),
        "title": doc["title"],
        "language": doc["language"],
        "content": doc["content"],
        "version": doc["version_count"],
        "active": bool(doc.get("active")),
        "created_at": doc["created_at"],
        "updated_at": doc["updated_at"],
    }


class Documents:
    """The document operations over the store's ``DocumentRepo`` with the configured limits."""

    def __init__(self, repo, config: dict):
        self.repo = repo
        self.max_bytes = int(config.get("DOCUMENT_MAX_BYTES", 1024 * 1024))
        self.fold_seconds = float(config.get("DOCUMENT_FOLD_SECONDS", 60.0))
        self.context_chars = int(config.get("DOCUMENT_CONTEXT_CHARS", 60_000))
        self.preview_interval = float(config.get("DOCUMENT_PREVIEW_INTERVAL", 0.1))

    def forget_session(self, owner: str, session_id: str, **_: object) -> None:
        """A session was deleted (the engine's ``session_deleted`` hook): its documents go with it."""
        self.repo.delete_session(owner, session_id)

    # ------------------------------------------------------------------ checks
    def check_content(self, value) -> str:
        """Content as a string within the size limit."""
        if not isinstance(value, str):
            raise BadRequest("content must be a string")
        size = len(value.encode("utf-8", "surrogatepass"))
        if size > self.max_bytes:
            raise PayloadTooLarge(f"the document would be {size} bytes; the limit is {self.max_bytes} bytes")
        return value

    # ------------------------------------------------------------------ writes
    def create(self, owner: str, session_id: Optional[str], title, language, content, *, source: str) -> dict:
        """A new document (version 1); in a session it becomes the active one."""
        return self.repo.create(
            owner,
            session_id,
            clean_title(title),
            normalise_language(language),
            self.check_content(content),
            source=source,
            summary="Created by the assistant" if source == "ai" else "Created",
        )

    def write(
        self, owner: str, doc_id: str, content, *, source: str, summary: Optional[str] = None
    ) -> Tuple[dict, bool]:
        """Replace the content (a new version, or a fold of a recent user save); (doc, changed)."""
        content = self.check_content(content)
        if summary is not None and (not isinstance(summary, str) or len(summary) > SUMMARY_MAX):
            raise BadRequest(f"summary must be a string of at most {SUMMARY_MAX} characters")
        summary = summary or ("Updated by the assistant" if source == "ai" else "Edited")
        return self.repo.write(
            owner,
            doc_id,
            content,
            source=source,
            summary=summary,
            fold_seconds=self.fold_seconds if source == "user" else 0.0,
        )

    def restore(self, owner: str, doc_id: str, number: int) -> dict:
        """A new version with version ``number``'s content, "Restored from vN"."""
        old = self.repo.version(owner, doc_id, number)
        doc, _ = self.repo.write(
            owner, doc_id, old["content"], source="user", summary=f"Restored from v{number}", force=True
        )
        return doc

    def edit(self, owner: str, doc_id: str, edits) -> Tuple[Optional[dict], int, List[str]]:
        """Apply ``[{find, replace}]`` in order, each to its first match; (doc or None, applied, skip notes).

        Nothing is stored when no edit applied.
        """
        doc = self.repo.get(owner, doc_id)
        content, applied, skipped = doc["content"], 0, []
        for number, edit in enumerate(_edit_list(edits, "edits"), 1):
            find, replace = edit.get("find"), edit.get("replace", "")
            if not isinstance(find, str) or not find or not isinstance(replace, str):
                skipped.append(f"#{number}: find must be a non-empty string and replace a string")
            elif find not in content:
                skipped.append(f"#{number}: the find text does not occur in the document")
            else:
                content = content.replace(find, replace, 1)
                applied += 1
        if not applied:
            return None, 0, skipped
        doc, _ = self.write(
            owner,
            doc_id,
            content,
            source="ai",
            summary=f"Edited by the assistant ({applied} change{'s' if applied != 1 else ''})",
        )
        return doc, applied, skipped

    def suggestions(self, doc: dict, items) -> Tuple[List[dict], List[str]]:
        """Valid suggestions (ids ``sugg-1``...) for ``doc``; no-ops dropped; (suggestions, skip notes)."""
        kept: List[dict] = []
        skipped: List[str] = []
        for number, item in enumerate(_edit_list(items, "suggestions"), 1):
            find, replace, reason = item.get("find"), item.get("replace", ""), item.get("reason", "")
            if not isinstance(find, str) or not find or not isinstance(replace, str) or not isinstance(reason, str):
                skipped.append(f"#{number}: find must be a non-empty string, replace and reason strings")
            elif find == replace:
                skipped.append(f"#{number}: replace equals find (no change)")
            elif find not in doc["content"]:
                skipped.append(f"#{number}: the find text does not occur in the document")
            else:
                kept.append(
                    {
                        "id": f"sugg-{len(kept) + 1}",
                        "find": find,
                        "replace": replace,
                        "reason": reason.strip()[:SUMMARY_MAX],
                    }
                )
        return kept, skipped


def _edit_list(value, name: str) -> Iterable[dict]:
    if not isinstance(value, list) or not value:
        raise BadRequest(f"{name} must be a non-empty list of objects")
    if len(value) > MAX_EDITS:
        raise BadRequest(f"at most {MAX_EDITS} {name} at once")
    return [item if isinstance(item, dict) else {} for item in value]


def suggestions_event(doc: dict, suggestions: List[dict]) -> Event:
    """``doc_suggestions`` for accepted suggestions."""
    return Event(DOC_SUGGESTIONS, {"doc_id": doc["id"], "suggestions": suggestions})


def record_touch(metadata: dict, event: Event) -> None:
    """Note a document event in the saved reply's metadata (``documents``: what it wrote or suggested)."""
    data = event.data
    touched = metadata.setdefault("documents", [])
    if event.type == DOC_UPDATE:
        touched.append(
            {
                "doc_id": data["doc_id"],
                "version": data["version"],
                "title": data["title"],
                "language": data["language"],
                "action": "create" if data["version"] == 1 else "update",
            }
        )
    elif event.type == DOC_SUGGESTIONS:
        touched.append({"doc_id": data["doc_id"], "action": "suggest", "suggestions": data["suggestions"]})
