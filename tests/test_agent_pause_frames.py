"""The agent projection tells a paused turn from a finished one (issue 38, item 10).

A turn that stopped for an approval, or at the round limit, used to end with the same ``done`` as a
finished one, and ``POST /api/agent/chat`` answered ``status: "done"`` with no approval id: an API
client could not tell that the task waits for it, nor what to answer. Now ``done`` (and the JSON
answer) carry ``completion``, ``paused`` and the ``approval_id`` the task waits for.
"""

from __future__ import annotations

import json

from agent_fakes import calls, say, use_script
from apphelpers import close_app

from odysseus import create_app


def named_events(raw: bytes) -> list:
    """(event name, data) of each named SSE frame."""
    out = []
    for block in raw.decode().split("\n\n"):
        name = data = None
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
        if name:
            out.append((name, data))
    return out


def _stream(client, **body):
    response = client.post("/api/agent/chat/stream", json={"message": "make a file", **body})
    assert response.status_code == 200
    return named_events(response.get_data())


def test_a_turn_paused_for_an_approval_says_so_and_names_the_approval(agent_app):
    use_script(agent_app, [calls(("c1", "shell", {"command": "touch made.txt"}))])
    events = _stream(agent_app.test_client())
    asked = [data for name, data in events if name == "ask_user"][0]["data"]
    names = [name for name, _ in events]
    assert names[-2:] == ["done", "close"]
    done = events[-2][1]
    assert done["paused"] is True and done["completion"] == "awaiting_approval"
    assert done["approval_id"] == asked["approval_id"]

    use_script(agent_app, [calls(("c2", "shell", {"command": "touch other.txt"}))])
    answer = agent_app.test_client().post("/api/agent/chat", json={"message": "make another file"}).get_json()
    assert answer["status"] == "done" and answer["paused"] is True
    assert answer["completion"] == "awaiting_approval" and answer["approval_id"].startswith("apr_")


def test_a_finished_turn_is_complete_and_not_paused(agent_app):
    use_script(agent_app, [say("All done.")])
    done = _stream(agent_app.test_client())[-2][1]
    assert done["completion"] == "complete" and done["paused"] is False and "approval_id" not in done
    use_script(agent_app, [say("Done again.")])
    answer = agent_app.test_client().post("/api/agent/chat", json={"message": "hi"}).get_json()
    assert answer["paused"] is False and answer["completion"] == "complete" and "approval_id" not in answer


def test_a_turn_paused_at_the_round_limit_says_why(tmp_path):
    app = create_app(
        {
            "DATA_DIR": str(tmp_path),
            "PROVIDERS": [],
            "AUTH": "none",
            "AGENT_TOOLS": "update_plan",
            "AGENT_MAX_ROUNDS": 1,
        }
    )
    try:
        plan = ("p1", "update_plan", {"plan": [{"step": "think", "status": "in_progress"}]})
        use_script(app, [calls(plan), calls(plan)])
        events = _stream(app.test_client())
        done = events[-2][1]  # (rounds_exhausted itself is a chat-projection event)
        assert events[-2][0] == "done" and done["paused"] is True and done["completion"] == "rounds_exhausted"
        assert "approval_id" not in done
    finally:
        close_app(app)


def test_every_round_carries_a_reply_budget_and_a_cut_reply_is_incomplete(agent_app):
    """Issue 37 defect 1: an agent round asked for no max_tokens (a local server generated until its slot
    was full) and a reply cut at the budget was reported complete."""
    from odysseus.events import delta, finish, usage

    cut = [delta("A long answer that the budget ended"), usage(10, 5), finish("length")]
    provider = use_script(
        agent_app, [calls(("p1", "update_plan", {"plan": [{"step": "go", "status": "pending"}]})), cut]
    )
    events = _stream(agent_app.test_client(), max_tokens=300)
    assert [r.max_tokens for r in provider.requests] == [300, 300]  # every round carries the turn's budget
    done = events[-2][1]
    assert done["completion"] == "incomplete" and done["paused"] is False

    provider = use_script(agent_app, [say("Short.")])
    _stream(agent_app.test_client())
    budget = provider.requests[0].max_tokens
    # no max_tokens asked: what the window has left after the prompt and the tool schemas (the scripted
    # provider gets the hosted default window, 128000)
    assert budget is not None and 120_000 < budget < 128_000


def test_tools_that_do_not_fit_the_window_are_left_out_with_a_notice(agent_app):
    """Issue 37 defect 2: tool schemas count in the window; on a small one the last-listed tools are
    left out (a notice names them) and the request sent fits."""
    book = agent_app.extensions["odysseus.turns"].parts["odysseus.window.book"]
    provider = use_script(agent_app, [say("Fits.")])
    _stream(agent_app.test_client())
    full = provider.requests[0]
    everything = [t["function"]["name"] for t in full.tools]
    assert len(everything) >= 2
    room_with_all = full.max_tokens  # what a 128000 window left: schemas + prompt = 128000 - this
    needed = 128_000 - room_with_all
    book.length = lambda candidate: (needed + 100, "config")  # room for 100: under the 256 a reply needs
    provider = use_script(agent_app, [say("Fits without some tools.")])
    events = _stream(agent_app.test_client())
    sent = provider.requests[0]
    kept = [t["function"]["name"] for t in sent.tools or []]
    assert kept == everything[: len(kept)] and len(kept) < len(everything)  # the last listed went first
    notices = [data for name, data in events if name == "notice"]
    assert notices and "Left out to fit the model's window" in notices[0]["message"]
    assert everything[-1] in notices[0]["message"]
    assert sent.max_tokens >= 256  # what was sent fits with room for a reply


def test_a_turn_asking_for_fewer_tokens_than_a_reply_needs_keeps_its_tools(agent_app):
    """A turn's own max_tokens under MIN_REPLY_TOKENS (256) on a big window: the tools all fit; only the
    room they leave is compared with what the turn asked for (found against a real llama-server)."""
    provider = use_script(agent_app, [say("Short.")])
    _stream(agent_app.test_client(), max_tokens=60)
    sent = provider.requests[0]
    assert sent.tools and sent.max_tokens == 60
