"""The offline demo model: deterministic, clearly labelled, paced like a real model.

It needs no network, so a fresh install can show the whole product working. In chat
mode every reply shows markdown with a code block, a table and math. In agent mode
(the request offers tools) a message asking for the *tool demo* plays a fixed script:
a plan (``update_plan``) and an exhibit (``present_exhibit``), then one ``run_python``
call that prints something (it needs the user's approval), the plan completed, then a closing answer.
The reply depends only on the request's messages, so tests can predict it.
"""

from __future__ import annotations

import re
from typing import Dict, Iterator, List, Optional

from ..cancel import CancelToken
from ..events import Event, delta, finish, tool_call, usage
from .base import ChatRequest

DEMO_MODEL = "odysseus-demo"
DEMO_LABEL = "Offline demo model"
#: words that start the scripted tool demo in agent mode
TOOL_DEMO_TRIGGER = re.compile(r"\btools?\b|\bdemo\b", re.IGNORECASE)
DEMO_CODE = 'print("Hello from the Odysseus demo!")\nprint("2 + 2 =", 2 + 2)\n'

_WORD = re.compile(r"\S+\s*")

SHOWCASE = r"""

Replies render as **markdown**, with highlighted code you can copy:

```python
def greet(name: str) -> str:
    return f"Hello, {name}!"
```

| Try this | What you will see |
|---|---|
| Reload mid-reply | the same reply continues, once |
| Press Stop | the partial reply is kept |
| Math | $e^{i\pi} + 1 = 0$ |
| Agent mode | ask for the *tool demo*: a plan, an approval card and an exhibit |
"""


def demo_reply(prompt: str) -> str:
    """The deterministic chat reply to ``prompt``."""
    prompt = " ".join(prompt.split())
    shown = prompt if len(prompt) <= 80 else prompt[:77] + "..."
    return (
        f"This is the offline demo model of Odysseus. You said: \u201c{shown}\u201d. "
        "No model provider is configured, so this reply is generated locally, word by word, "
        "to show streaming, stop and resume working end to end. Configure OPENAI_BASE_URL, "
        "OLLAMA_HOST or ANTHROPIC_API_KEY to talk to a real model." + SHOWCASE.rstrip("\n")
    )


def demo_thinking(prompt: str) -> str:
    """The deterministic reasoning part shown before the reply."""
    return f"The user wrote {len(prompt.split())} words. I will answer as the offline demo."


def tokenize(text: str) -> List[str]:
    """Split text into word-sized tokens that join back to the original."""
    return _WORD.findall(text)


DEMO_PLAN = [
    ("Make a plan", "completed"),
    ("Show an exhibit", "completed"),
    ("Run a little Python (asks you first)", "in_progress"),
    ("Sum up", "pending"),
]
DEMO_EXHIBIT = {
    "id": "exh_demo_tour",
    "title": "What agent mode shows",
    "layout": "stack",
    "elements": [
        {
            "type": "table",
            "caption": "Parts of an agent reply",
            "columns": ["Part", "Where it comes from"],
            "rows": [
                ["Plan", "update_plan"],
                ["Exhibit", "present_exhibit"],
                ["Approval card", "run_python needs your yes"],
                ["Tool row", "each call and its output"],
            ],
        }
    ],
}


def _plan(done: int) -> dict:
    steps = []
    for index, (step, _) in enumerate(DEMO_PLAN):
        status = "completed" if index < done else ("in_progress" if index == done else "pending")
        steps.append({"step": step, "status": status})
    return {"steps": steps}


def tool_script_stage(messages: List[dict], tool_names: List[str]) -> Optional[int]:
    """Which round of the tool demo this request is at (0-3), or None when it is not the tool demo.

    The demo runs when the newest user message asks for it and the request offers
    ``update_plan``, ``present_exhibit`` and ``run_python``; the step is how many of the
    script's rounds already have results after that message.
    """
    if not {"update_plan", "present_exhibit", "run_python"} <= set(tool_names):
        return None
    called: List[str] = []
    for message in reversed(messages):
        if message.get("role") == "user":
            if not isinstance(message.get("content"), str) or not TOOL_DEMO_TRIGGER.search(message["content"]):
                return None
            break
        for call in message.get("tool_calls") or []:
            called.append((call.get("function") or {}).get("name", ""))
    else:
        return None
    if "run_python" in called:
        return 3 if called.count("update_plan") >= 2 else 2
    if "update_plan" in called:
        return 1
    return 0


class DemoProvider:
    """A provider that streams ``demo_reply`` with ``token_delay`` seconds between tokens."""

    kind = "demo"

    def __init__(self, name: str = "demo", token_delay: float = 0.03, reply_words: int = 0):
        self.name = name
        self.token_delay = token_delay
        self.reply_words = reply_words  # >0: pad the reply to this many words (long-run tests)
        self.default_model: Optional[str] = None
        self.prices: Dict[str, dict] = {}

    def list_models(self) -> List[str]:
        """The one demo model."""
        return [DEMO_MODEL]

    def _prompt(self, request: ChatRequest) -> str:
        for message in reversed(request.messages):
            if message.get("role") == "user" and isinstance(message.get("content"), str):
                return message["content"]
        return ""

    def _words(self, text: str, cancel: CancelToken) -> Iterator[Event]:
        for token in tokenize(text):
            if cancel.wait(self.token_delay):
                return
            yield delta(token)

    def stream(self, request: ChatRequest, cancel: CancelToken) -> Iterator[Event]:
        """Yield reasoning, then the reply, one word at a time (or the tool demo's next round)."""
        names = [(t.get("function") or {}).get("name", "") for t in request.tools or []]
        stage = tool_script_stage(request.messages, names) if request.tools else None
        if stage is not None:
            yield from self._tool_round(stage, cancel)
            return
        prompt = self._prompt(request)
        thinking = tokenize(demo_thinking(prompt))
        reply_text = demo_reply(prompt)
        if self.reply_words:
            words = tokenize(reply_text)
            filler = [f"word{i} " for i in range(max(0, self.reply_words - len(words)))]
            reply_text = "".join(words + filler)
        reply = tokenize(reply_text)
        for token in thinking:
            if cancel.wait(self.token_delay):
                return
            yield delta(token, thinking=True)
        for token in reply:
            if cancel.wait(self.token_delay):
                return
            yield delta(token)
        yield usage(len(prompt.split()), len(thinking) + len(reply))
        yield finish("stop")

    def _tool_round(self, stage: int, cancel: CancelToken) -> Iterator[Event]:
        """One round of the scripted tool demo (see the module docstring)."""
        if stage == 0:
            yield delta("Agent mode tool demo (offline demo model). First a plan and an exhibit. ", thinking=True)
            yield from self._words("Here is the plan, and an exhibit of what an agent reply contains. ", cancel)
            yield tool_call("demo_plan", "update_plan", _plan(2), 0)
            yield tool_call("demo_exhibit", "present_exhibit", DEMO_EXHIBIT, 1)
            yield usage(8, 24)
            yield finish("tool_calls")
        elif stage == 1:
            yield from self._words("Now a small Python snippet. It runs code, so it asks you first. ", cancel)
            yield tool_call("demo_python", "run_python", {"code": DEMO_CODE}, 0)
            yield usage(12, 16)
            yield finish("tool_calls")
        elif stage == 2:
            yield from self._words("The snippet ran and printed its two lines (see the tool row). ", cancel)
            yield tool_call("demo_plan_done", "update_plan", _plan(len(DEMO_PLAN)), 0)
            yield usage(16, 12)
            yield finish("tool_calls")
        else:
            yield from self._words(
                "That was the whole agent loop: the model asked for tools, you approved the one that runs code, "
                "and its output came back to the model. With a real model configured, the agent plans and calls "
                "tools on its own.",
                cancel,
            )
            yield usage(20, 40)
            yield finish("stop")
