"""A real conversation for the layout, screenshot and accessibility tests: a question, a reply with
markdown and code, and an agent reply with a tool card, written straight into the server's database."""

from __future__ import annotations

import os

import requests

from odysseus.store import Store

CODE_REPLY = """Here is a **small** example, with a list and some code:

1. Read the file.
2. Count the *words*.

```python
def count_words(path: str) -> int:
    with open(path) as f:
        return len(f.read().split())
```

| file | words |
| --- | --- |
| notes.txt | 120 |
"""

AGENT_REPLY = "The folder holds two files: `a.txt` and `b.txt`."

AGENT_META = {
    "agent": {
        "tools": [
            {
                "tool": "shell",
                "command": "ls",
                "call_id": "c1",
                "round": 1,
                "output": "a.txt\nb.txt",
                "exit_code": 0,
            }
        ]
    },
    "model_info": {"label": "demo"},
}


def seed_conversation(server) -> str:
    """Create a chat with three messages and a reply of each kind; return its id."""
    session = requests.post(server.url + "/api/sessions", json={"title": "Counting words"}, timeout=10).json()
    sid = session["id"]
    store = Store(os.path.join(server.data_dir, "odysseus.db"))
    try:
        owner = store.locked.db["sessions"].get(sid)["owner"]
        store.messages.add(owner, sid, "user", "How do I count the words in a file with Python?")
        store.messages.add(owner, sid, "assistant", CODE_REPLY, metadata={"model_info": {"label": "demo"}})
        store.messages.add(owner, sid, "user", "What is in my folder?")
        store.messages.add(owner, sid, "assistant", AGENT_REPLY, metadata=AGENT_META)
    finally:
        store.locked.db.conn.close()
    return sid


def set_theme(page, theme: str) -> None:
    """Switch the page to the light or dark theme (theme.js's own preference)."""
    page.evaluate("t => window.odysseusTheme.set(t)", theme)
    page.wait_for_function("t => document.documentElement.dataset.effectiveTheme === t", arg=theme)


def open_document(server, page, sid: str) -> None:
    """Create a document in the chat and open it in the document panel."""
    doc = requests.post(
        server.url + "/api/document",
        json={"session_id": sid, "title": "Notes", "language": "markdown", "content": "# Notes\n\nA first line.\n"},
        timeout=10,
    ).json()
    page.evaluate("id => window.odysseus.documents.openById(id)", doc["id"])
    page.wait_for_selector("#doc-panel:not([hidden])")
