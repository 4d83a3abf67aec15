"""Session titles written after the first reply.

When a session's first reply finishes (the engine's ``run_finished`` hook), a background greenlet
asks for a short title: the ``TITLE_MODEL`` route when configured, else the model that
answered (``TITLE_MODE = "first_line"`` never asks, and titles right in the finished run's
greenlet: one statement finds whether this was the first reply, one update at most). With the offline demo model, on any
failure, or after ``TITLE_TIMEOUT`` seconds, the title is the first line of the user's
message made clean (no markdown, no line breaks). A title the user has set in the meantime is never overwritten: the
update only applies while the session still has its automatic title.

[issue 40] What runs where, so a title costs the streams nothing: under gunicorn's gevent worker
the title is a greenlet (``gevent.spawn``; never a native thread, which would hold the GIL while
it parses the model's reply), its model request is cooperative socket I/O like a stream's, it
runs at the lowest priority (``after_streams``: its start and each event of its reply wait until
the hub is idle), and its one write (the conditional ``update sessions``) goes to the run engine's native writer
thread (``DurableLog.write``), where every other write of a run's end goes: the hub never takes
SQLite's write lock for a title. The look that decides whether to title (``first_reply_state``)
is one indexed read on the request-path connection, as every turn's history read is.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Callable, List, Optional, Tuple

from ..cancel import CancelToken
from ..events import DELTA
from ..llm.base import ChatRequest
from ..llm.llm_core import stream_route
from ..runs.native import gevent_active
from ..store.messages import REPLY_BLANKS

log = logging.getLogger(__name__)

MAX_TITLE = 60
DEFAULT_TITLE = "New chat"
PROMPT = (
    "Write a title of at most six words for the conversation below. Answer with the title only: "
    "no quotes, no markdown, no final period."
)
_MARKUP = re.compile(r"[*_`#>~|\[\]]+")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_LIST_MARK = re.compile(r"^\s*(?:[-+*]|\d+[.)])\s+")
_LABEL = re.compile(r"^\s*title\s*:\s*", re.IGNORECASE)


def auto_title(message: str) -> str:
    """The title a session gets when its first message creates it (as the turn start names it)."""
    text = " ".join(message.split())
    return text if len(text) <= MAX_TITLE else text[:57] + "..."


def clean_title(text: str) -> str:
    """The first non-empty line of ``text`` without markdown, quotes or line breaks, at most 60 characters."""
    line = next((ln for ln in (text or "").splitlines() if _MARKUP.sub("", ln).strip()), "")
    line = _LIST_MARK.sub("", _LINK.sub(r"\1", line))
    quotes = " \"'\u201c\u201d\u2018\u2019"
    line = " ".join(_MARKUP.sub("", line).split()).strip(quotes)
    line = _LABEL.sub("", line).strip(quotes)
    if line.endswith(".") and not line.endswith(".."):
        line = line[:-1]
    if len(line) > MAX_TITLE:
        cut = line[: MAX_TITLE - 1]
        line = (cut.rsplit(" ", 1)[0] if " " in cut[20:] else cut) + "…"
    return line


def ask_model(candidates, first_message: str, reply: str, timeout: float) -> str:
    """A clean title from the model, or "" when it fails, says nothing usable or takes too long."""
    request = ChatRequest(
        model=candidates[0].model,
        temperature=0.2,
        max_tokens=32,
        messages=[
            {"role": "system", "content": PROMPT},
            {"role": "user", "content": f"User: {first_message[:2000]}\n\nAssistant: {reply[:2000]}"},
        ],
    )
    cancel = CancelToken()
    timer = threading.Timer(timeout, lambda: cancel.cancel("timeout"))
    timer.daemon = True
    timer.start()
    parts: List[str] = []
    try:
        for event in stream_route(candidates, request, cancel):
            after_streams()  # [issue 40] each step of a title waits until the streams have nothing to do
            if event.type == DELTA and not event.data.get("thinking"):
                parts.append(event.data["delta"])
                if title_is_complete("".join(parts)):
                    break  # [issue 40] the rest would be read and parsed for nothing
    except Exception as exc:  # noqa: BLE001 - any failure falls back to the message's first line
        log.info("title request failed: %s", exc)
        return ""
    finally:
        timer.cancel()
        cancel.cancel("done")  # closes the provider connection if we stopped reading early
    return clean_title("".join(parts))


def title_is_complete(text: str) -> bool:
    """True once ``text`` holds all ``clean_title`` uses: a finished first non-blank line, or
    ``2 * MAX_TITLE`` characters of one still going (the title keeps at most ``MAX_TITLE`` of it)."""
    if len(text) >= 2 * MAX_TITLE:
        return True
    head, newline, _rest = text.partition("\n")
    while newline:
        if _MARKUP.sub("", head).strip():
            return True
        head, newline, _rest = _rest.partition("\n")
    return False


#: what ``trim`` removes from a reply for it to count: ``REPLY_BLANKS`` as an SQL expression
_BLANKS = f"char({', '.join(str(ord(c)) for c in REPLY_BLANKS)})"


def first_reply_state(store, owner: str, session_id: str) -> Optional[Tuple[str, str]]:
    """``(first user message, current title)`` when the owner's session has exactly one non-blank reply, else None.

    One statement: the first user message, whether a second non-blank reply exists, and the title.
    """
    with store.locked.read() as db:
        row = db.execute(
            "select (select content from messages where session_id = ?1 and owner = ?2 and role = 'user'"
            " order by id limit 1),"
            " (select count(*) from (select 1 from messages where session_id = ?1 and owner = ?2"
            f" and role = 'assistant' and length(trim(content, {_BLANKS})) > 0 limit 2)),"
            " (select title from sessions where id = ?1 and owner = ?2)",
            [session_id, owner],
        ).fetchone()
    first, replies, title = row
    if first is None or replies != 1 or title is None:
        return None
    return first, title


def after_streams() -> None:
    """Under gevent, wait until the hub has nothing else ready to run (``gevent.idle``); else return.

    A title is the one piece of a worker's work nobody waits for, so it runs at the lowest priority:
    its start and each event of its reply wait for a moment when no stream has work ready. On a busy
    worker titles are late (``TITLE_TIMEOUT`` then gives the first line), never the streams.
    """
    if gevent_active():
        import gevent

        gevent.idle()


def _background(fn: Callable[[], None]) -> None:
    """Run ``fn`` in a greenlet on the server (gevent patched) once the hub is idle, else in a daemon
    thread (in-process tests)."""
    if gevent_active():
        import gevent

        def when_idle() -> None:
            after_streams()
            fn()

        gevent.spawn(when_idle)
    else:
        threading.Thread(target=fn, name="title", daemon=True).start()


class TitleWriter:
    """Subscribes to ``run_finished`` for one app and titles sessions after their first reply."""

    def __init__(
        self, store, router, manager, config: dict, spawn: Optional[Callable[[Callable[[], None]], None]] = None
    ):
        self.store, self.router, self.manager = store, router, manager
        self.ask = str(config.get("TITLE_MODE") or "model").strip().lower() != "first_line"
        self.model = str(config.get("TITLE_MODEL") or "")
        self.timeout = float(config.get("TITLE_TIMEOUT") or 20.0)
        self.spawn = spawn or _background

    def on_run_finished(self, run) -> None:
        """``run_finished`` receiver (this app's engine): hand a finished first reply to a background greenlet."""
        if run.status != "done" or not run.content.strip():
            return
        if run.follows_reply:
            # [issue 22] its history already held a non-blank reply, so this one makes two at least and
            # ``first_reply_state`` would say no: a follow-up turn (most turns) costs no statement here
            return
        owner, session_id, model, reply = run.owner, run.session_id, run.model, run.content
        if not self.ask:
            # [startpath, issue 22] the first line needs no model: two statements at most, right here
            # (no thread per finished run; a later reply costs the one statement that says so)
            self._title_safely(owner, session_id, model, reply)
            return
        self.spawn(lambda: self._title_safely(owner, session_id, model, reply))

    def _title_safely(self, owner: str, session_id: str, model: str, reply: str) -> None:
        try:
            self.write_title(owner, session_id, model, reply)
        except Exception:  # noqa: BLE001 - a title is never worth a crash
            log.exception("titling session %s failed", session_id)

    def write_title(self, owner: str, session_id: str, model: str, reply: str) -> Optional[str]:
        """Title the session if this was its first reply and it still has its automatic title."""
        found = first_reply_state(self.store, owner, session_id)
        if found is None:
            return None
        first, current = found
        if current not in (auto_title(first), DEFAULT_TITLE):
            return None  # the user (or an import) named it
        title = ""
        candidates = self._candidates(model) if self.ask else []
        if candidates:
            title = ask_model(candidates, first, reply, self.timeout)
        title = title or clean_title(first) or DEFAULT_TITLE
        if title == current:
            return title
        update = (  # only while nobody renamed it since we looked
            "update sessions set title = ? where id = ? and owner = ? and title = ?",
            [title, session_id, owner, current],
        )
        durable = getattr(self.manager, "durable", None)
        if durable is None:  # pragma: no cover - every app's engine has its writer
            with self.store.locked.tx() as db:
                db.execute(*update)
        else:
            durable.write([update], timeout=self.timeout + 30)  # on the native writer: no write on the hub
        return title

    def _candidates(self, model: str):
        """The title route: TITLE_MODEL, else the answering route; none for the offline demo model."""
        try:
            candidates = self.router.resolve(self.model or model)
        except Exception:  # noqa: BLE001 - an unknown TITLE_MODEL falls back to the first line
            return []
        return [c for c in candidates if c.provider.kind != "demo"]
