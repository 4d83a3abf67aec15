"""Test doubles for research jobs: a model that answers by task, and a site of local pages.

``ResearchModel`` is the scripted OpenAI-compatible server, but it picks its reply by the
``Task: <name>.`` line every research prompt starts with (page reads run concurrently, so
replies in a fixed order would not do). ``Site`` serves pages on 127.0.0.1 and records hits.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Dict, List, Optional, Union

from scripted_model import ScriptedModel, reply

Answer = Union[dict, Callable[[dict], dict], List[dict]]
TASK = re.compile(r"^Task: (\w+)\.")


def task_of(body: dict) -> str:
    """Which research task a request is (probe, plan, extract, analyze, write), or ''."""
    system = next((m.get("content") or "" for m in body.get("messages", []) if m.get("role") == "system"), "")
    match = TASK.match(system)
    return match.group(1) if match else ""


def user_text(body: dict) -> str:
    """The user message of a request."""
    return next((m.get("content") or "" for m in body.get("messages", []) if m.get("role") == "user"), "")


def page_url(body: dict) -> str:
    """The URL an extract request is about."""
    match = re.search(r"^URL: (\S+)$", user_text(body), re.M)
    return match.group(1) if match else ""


class ResearchModel(ScriptedModel):
    """Answers per task: ``answers[task]`` is a reply, a list of replies (used in turn, the last repeats)
    or ``callable(body) -> reply``."""

    def __init__(self, answers: Optional[Dict[str, Answer]] = None):
        super().__init__()
        self.answers: Dict[str, Answer] = dict(DEFAULTS, **(answers or {}))

    def set(self, **answers: Answer) -> None:
        """Change answers and forget earlier requests."""
        with self.lock:
            self.answers = dict(DEFAULTS, **answers)
            self.requests.clear()

    def tasks(self) -> List[str]:
        """The task of every request so far, in arrival order."""
        with self.lock:
            return [task_of(b) for b in self.requests]

    def next_reply(self, body: dict) -> dict:
        with self.lock:
            self.requests.append(body)
            answer = self.answers.get(task_of(body), reply("(no answer scripted)"))
            if isinstance(answer, list):
                answer = answer.pop(0) if len(answer) > 1 else answer[0]
        return answer(body) if callable(answer) else answer


def default_extract(body: dict) -> dict:
    """One finding naming the page's URL path."""
    url = page_url(body)
    return reply(json.dumps([f"Finding from {url.rsplit('/', 1)[-1]}"]))


DEFAULTS: Dict[str, Answer] = {
    "probe": reply("OK"),
    "plan": reply('["alpha query", "beta query"]'),
    "extract": default_extract,
    "analyze": reply('{"continue": false, "queries": []}'),
    "write": reply("## Answer\n\nAlpha is first [1]. Beta follows [2]."),
}


class Site:
    """Local pages: ``pages[path] = (title, body text)``; ``delays[path]`` seconds before answering."""

    def __init__(self, pages: Optional[Dict[str, tuple]] = None):
        self.pages: Dict[str, tuple] = dict(pages or {})
        self.delays: Dict[str, float] = {}
        self.hits: List[str] = []
        self.active = 0
        self.most_active = 0
        self.lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802 - http.server naming
                path = self.path.split("?", 1)[0]
                with site.lock:
                    site.hits.append(path)
                    site.active += 1
                    site.most_active = max(site.most_active, site.active)
                try:
                    time.sleep(site.delays.get(path, 0.0))  # the scenario: a slow page, as scripted
                    if path not in site.pages:
                        self.send_error(404)
                        return
                    title, text = site.pages[path]
                    body = (
                        f"<!doctype html><html><head><title>{title}</title></head>"
                        f"<body><main><p>{text}</p></main></body></html>"
                    ).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html; charset=utf-8")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    with site.lock:
                        site.active -= 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def rows(self, *paths: str) -> List[dict]:
        """Search result rows pointing at ``paths``."""
        return [{"title": self.pages.get(p, (p,))[0], "url": self.url + p, "content": f"snippet {p}"} for p in paths]

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()
