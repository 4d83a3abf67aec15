"""The agent loop driven by an in-process scripted provider: rounds, pairing, guards, tool failures."""

from __future__ import annotations

import pytest
from agent_fakes import ScriptedProvider, boom_tool, calls, echo_tool, say, slow_tool

from odysseus.agent.agent_loop import AgentHooks, AgentLoop, Resolution, initial_state
from odysseus.agent.guards import LAST_ROUND, NUDGE, AgentSettings, LoopBreaker, announces_action, sanitize
from odysseus.cancel import CancelToken
from odysseus.config import load_config
from odysseus.errors import ProviderHTTPError
from odysseus.llm.llm_core import Candidate
from odysseus.runs.engine import RunEngine, StartSpec
from odysseus.runs.run import RunContext
from odysseus.store import Store
from odysseus.tools.registry import ToolContext, ToolRegistry
from odysseus.tools.ui import ui_tools


class Harness:
    """One scripted provider, a registry and hooks that keep approvals in a dict."""

    def __init__(self, steps, tools=None, tmp_path=None, **settings):
        self.provider = ScriptedProvider(steps)
        self.registry = ToolRegistry(tools if tools is not None else [echo_tool()])
        self.settings = AgentSettings(**{"progress_interval": 0.1, **settings})
        self.approvals = {}
        self.tmp = str(tmp_path or "")
        self.hooks = AgentHooks(request_approval=self._approval, tool_context=self._tool_ctx)

    def _approval(self, ctx, call, state):
        approval_id = f"apr_{len(self.approvals) + 1}"
        self.approvals[approval_id] = {"call": call, "state": state}
        return {"approval_id": approval_id, "expires_at": 0}

    def _tool_ctx(self, ctx):
        return ToolContext(
            owner=ctx.owner, session_id=ctx.session_id, cancel=ctx.cancel, config={}, workspace_root=self.tmp
        )

    def run(self, state=None, resolution=None, prompt="hi"):
        """Drive one turn to its end; returns (events, ctx, state)."""
        ctx = RunContext("run_t", "s_t", "local", CancelToken())
        state = state or initial_state([{"role": "user", "content": prompt}], self.settings)
        loop = AgentLoop(
            [Candidate(self.provider, "script-1")], self.registry, self.settings, self.hooks, state, ctx, resolution
        )
        events = list(loop.run())
        return events, ctx, state


def kinds(events):
    return [e.type for e in events]


def of(events, kind):
    return [e for e in events if e.type == kind]


def text(events):
    return "".join(e.data["delta"] for e in events if e.type == "delta" and not e.data.get("thinking"))


def test_one_round_pairs_the_result_with_the_call_id():
    h = Harness([calls(("c1", "echo", {"text": "hi"}), text="Checking."), say("The tool said hi.")])
    events, ctx, _ = h.run()
    names = kinds(events)
    assert names[:2] == ["agent_prep", "agent_step"]
    assert names.index("tool_start") < names.index("tool_output") < names.index("agent_step", 2)
    start, output = of(events, "tool_start")[0], of(events, "tool_output")[0]
    server_id = start.data.pop("server_id")
    assert server_id.startswith("tc_") and output.data["server_id"] == server_id
    assert start.data == {
        "tool": "echo",
        "command": "echo hi",
        "full_command": "echo hi",
        "round": 1,
        "call_id": "c1",
        "arguments": {"text": "hi"},
    }
    assert output.data["output"] == "echo: hi" and output.data["exit_code"] == 0 and output.data["command"] == "echo hi"
    second = h.provider.requests[1].messages
    assistant, result = second[-2], second[-1]
    assert assistant["role"] == "assistant" and assistant["tool_calls"][0]["id"] == "c1"
    assert assistant["tool_calls"][0]["function"] == {"name": "echo", "arguments": '{"text": "hi"}'}
    assert result == {"role": "tool", "tool_call_id": "c1", "content": "echo: hi"}
    assert h.provider.requests[0].tools[0]["function"]["name"] == "echo"
    assert text(events) == "Checking.\n\nThe tool said hi."
    assert ctx.terminal["completion"] == "complete" and ctx.terminal["tool_calls"] == 1
    assert [r["text"] for r in ctx.terminal["rounds"]] == ["Checking.", "The tool said hi."]
    assert ctx.metadata["agent"]["tools"][0]["output"] == "echo: hi"


def test_each_tool_row_saves_where_in_the_text_it_ran():
    """[issue 35] ``text_offset`` (code points of the reply's text before the row) lets the page draw
    the saved reply's tool rows between the texts they came between, as it drew them live."""
    h = Harness(
        [
            calls(("a", "echo", {"text": "1"})),  # a tool before any text: offset 0
            calls(("b", "echo", {"text": "2"}), ("c", "echo", {"text": "3"}), text="Café ☕ first."),
            say("Then the end."),
        ]
    )
    events, ctx, _ = h.run()
    content = text(events)
    assert content == "Café ☕ first.\n\nThen the end."
    offsets = [row["text_offset"] for row in ctx.metadata["agent"]["tools"]]
    assert offsets == [0, len("Café ☕ first."), len("Café ☕ first.")]
    assert content[: offsets[1]] == "Café ☕ first." and content[offsets[1] :].strip() == "Then the end."


def test_several_rounds_and_parallel_calls_keep_every_pair():
    h = Harness(
        [
            calls(("a", "echo", {"text": "1"}), ("b", "echo", '{"text": "2"}')),
            calls(("c", "echo", {"text": "3"})),
            say("done"),
        ]
    )
    events, ctx, _ = h.run()
    assert [e.data["round"] for e in of(events, "agent_step")] == [1, 2, 3]
    assert [e.data["call_id"] for e in of(events, "tool_output")] == ["a", "b", "c"]
    final = h.provider.requests[2].messages
    pairs = [(m["tool_call_id"], m["content"]) for m in final if m["role"] == "tool"]
    assert pairs == [("a", "echo: 1"), ("b", "echo: 2"), ("c", "echo: 3")]
    # each tool message follows the assistant message that carries its id
    for index, message in enumerate(final):
        if message["role"] == "tool":
            owner = next(m for m in reversed(final[:index]) if m["role"] == "assistant" and m.get("tool_calls"))
            assert message["tool_call_id"] in [c["id"] for c in owner["tool_calls"]]
    assert ctx.terminal["completion"] == "complete" and len(ctx.terminal["rounds"]) == 3


def test_tool_exception_becomes_an_error_result_and_the_loop_goes_on():
    h = Harness(
        [calls(("x", "boom", {})), calls(("y", "nope", {}), ("z", "echo", "{not json")), say("recovered")],
        tools=[boom_tool(), echo_tool()],
    )
    events, ctx, _ = h.run()
    outputs = of(events, "tool_output")
    assert outputs[0].data["exit_code"] == 1 and "kaboom" in outputs[0].data["output"]
    assert "no tool named 'nope'" in outputs[1].data["output"]
    assert "not valid JSON" in outputs[2].data["output"]
    seen = [m["content"] for m in h.provider.requests[1].messages if m["role"] == "tool"]
    assert "kaboom" in seen[0]
    assert text(events).endswith("recovered") and ctx.terminal["completion"] == "complete"


def test_tool_timeout_reports_progress_then_an_error_result():
    slow = slow_tool()
    slow.timeout = 0.5
    h = Harness([calls(("s", "slow", {"seconds": 30})), say("gave up")], tools=[slow])
    events, ctx, _ = h.run()
    progress = of(events, "tool_progress")
    assert progress, "a tool running past the interval reports progress"
    assert progress[0].data["tool"] == "slow" and progress[0].data["round"] == 1
    assert "tick" in progress[0].data["message"] and progress[0].data["elapsed"] > 0
    output = of(events, "tool_output")[0]
    assert output.data["exit_code"] == 124 and "timed out" in output.data["output"]
    assert "timed out" in h.provider.requests[1].messages[-1]["content"]
    assert text(events) == "gave up"


def test_rounds_exhausted_saves_a_continuation_that_picks_up_the_task():
    h = Harness([calls((f"c{i}", "echo", {"text": str(i)})) for i in range(1, 3)], max_rounds=2)
    events, ctx, _ = h.run()
    exhausted = of(events, "rounds_exhausted")
    assert exhausted and exhausted[0].data["rounds"] == 2
    assert ctx.terminal["completion"] == "rounds_exhausted"
    assert "round limit" in text(events)
    saved = ctx.metadata["agent"]["continuation"]
    assert [m["tool_call_id"] for m in saved["messages"] if m["role"] == "tool"] == ["c1", "c2"]
    h2 = Harness([say("finished after continuing")], max_rounds=2)
    saved["messages"].append({"role": "user", "content": "go on"})
    events2, ctx2, _ = h2.run(state=saved)
    assert of(events2, "agent_step")[0].data["round"] == 3
    sent = h2.provider.requests[0].messages
    assert [m.get("tool_call_id") for m in sent if m["role"] == "tool"] == ["c1", "c2"]
    assert sent[-1] == {"role": "user", "content": "go on"}
    assert ctx2.terminal["completion"] == "complete"


def test_budget_exceeded_ends_the_turn_with_limit_and_used():
    h = Harness(
        [calls(("a", "echo", {"text": "1"})), calls(("b", "echo", {"text": "2"}), ("c", "echo", {"text": "3"}))],
        max_tool_calls=2,
    )
    events, ctx, _ = h.run()
    budget = of(events, "budget_exceeded")[0]
    assert budget.data == {"limit": 2, "used": 1, "requested": 2}
    assert len(of(events, "tool_output")) == 1
    assert ctx.terminal["completion"] == "budget_exceeded" and "budget" in text(events)


def test_loop_breaker_then_one_last_round_without_tools():
    same = calls(("r", "echo", {"text": "again"}))
    h = Harness([same, same, same, say("Here is what I found.")], loop_repeats=3)
    events, ctx, _ = h.run()
    trig = of(events, "loop_breaker_triggered")[0]
    assert trig.data["tool"] == "echo" and trig.data["repeats"] == 3 and trig.data["rounds"] == [1, 2, 3]
    assert len(of(events, "tool_output")) == 2  # the third repeat is not executed
    last = h.provider.requests[-1]
    assert last.tools is None and last.messages[-1]["content"] == LAST_ROUND
    assert text(events) == "Here is what I found."
    assert ctx.terminal["completion"] == "loop_breaker_triggered"


def test_loop_breaker_ignores_repeats_with_new_text():
    h = Harness([calls(("r", "echo", {"text": "x"}), text=f"step {i}") for i in range(3)] + [say("ok")])
    events, _, _ = h.run()
    assert not of(events, "loop_breaker_triggered")


def test_intent_nudges_then_exhausted():
    h = Harness(
        [say("Let me search for that."), say("I'll check the docs now."), say("Let me look it up.")], max_nudges=2
    )
    events, ctx, _ = h.run()
    nudged = [r for r in h.provider.requests if r.messages[-1]["content"] == NUDGE]
    assert len(nudged) == 2
    exhausted = of(events, "intent_nudge_exhausted")[0]
    assert exhausted.data["nudges"] == 2 and exhausted.data["limit"] == 2
    assert ctx.terminal["completion"] == "intent_nudge_exhausted"
    assert "announcing an action" in text(events)


def test_intent_nudge_recovers_when_the_model_calls_the_tool():
    h = Harness([say("Let me run the echo tool."), calls(("e", "echo", {"text": "ok"})), say("All good.")])
    events, ctx, _ = h.run()
    assert not of(events, "intent_nudge_exhausted")
    assert of(events, "tool_output")[0].data["output"] == "echo: ok"
    assert ctx.metadata["agent"]["nudges"] == 1 and ctx.terminal["completion"] == "complete"


def test_plan_and_ui_control_tools_emit_their_events():
    h = Harness(
        [
            calls(
                (
                    "p",
                    "update_plan",
                    {"steps": [{"step": "look", "status": "completed"}, {"step": "answer", "status": "in_progress"}]},
                ),
                ("u", "ui_control", {"action": "set_theme", "theme": "dark"}),
                ("v", "ui_control", {"action": "format_disk"}),
                ("w", "ui_control", {"action": "set_mode", "mode": "root"}),
            ),
            say("ok"),
        ],
        tools=ui_tools(),
    )
    events, ctx, _ = h.run()
    assert of(events, "plan_update")[0].data["data"]["steps"][1] == {"step": "answer", "status": "in_progress"}
    assert of(events, "ui_control")[0].data["data"] == {"action": "set_theme", "theme": "dark"}
    assert len(of(events, "ui_control")) == 1
    assert "unknown action" in of(events, "tool_output")[2].data["output"]
    assert "mode must be one of chat, agent" in of(events, "tool_output")[3].data["output"]
    assert ctx.metadata["agent"]["plan"]["steps"][0]["step"] == "look"


def _ask_first():
    h = Harness(
        [calls(("ok1", "echo", {"text": "free"}), ("g1", "guarded", {"text": "rm"}))],
        tools=[echo_tool(), echo_tool(needs_approval=True, name="guarded")],
    )
    events, ctx, _ = h.run()
    ask = of(events, "ask_user")[0].data["data"]
    assert ask["kind"] == "tool_approval" and ask["approval_id"] == "apr_1"
    assert ask["call"]["server_id"].startswith("tc_")
    assert ask["call"] == {
        "call_id": "g1",
        "server_id": ask["call"]["server_id"],
        "tool": "guarded",
        "arguments": {"text": "rm"},
    }
    assert kinds(events)[-2:] == ["ask_user", "delta"]
    assert [e.data["call_id"] for e in of(events, "tool_output")] == ["ok1"]
    saved = h.approvals["apr_1"]["state"]
    assert saved["pending"][0]["id"] == "g1"
    assert ctx.terminal["completion"] == "awaiting_approval"
    return h, saved


def test_approval_needed_ends_the_turn_with_ask_user_and_a_saved_state():
    _, saved = _ask_first()
    assert [c["id"] for c in saved["pending"]] == ["g1"]


@pytest.mark.parametrize("decision", ["approve", "approve_task", "deny"])
def test_approval_resolution_continues_the_task(decision):
    h, saved = _ask_first()
    h.provider.steps = [calls(("g2", "guarded", {"text": "again"})), say("finished")]
    call = h.approvals["apr_1"]["call"]
    events, ctx, _ = h.run(state=saved, resolution=Resolution("apr_1", decision, call))
    resolved = of(events, "tool_approval_resolved")[0]
    assert resolved.data["decision"] == decision and resolved.data["call_id"] == "g1"
    tool_msgs = [m for m in h.provider.requests[-1].messages if m["role"] == "tool"]
    by_id = {m["tool_call_id"]: m["content"] for m in tool_msgs}
    if decision == "deny":
        assert "denied" in by_id["g1"]
    else:
        assert by_id["g1"] == "echo: rm"
    if decision == "approve_task":
        # the same tool later in the task runs without asking again
        assert not of(events, "ask_user") and text(events).endswith("finished")
    else:
        assert of(events, "ask_user")[0].data["data"]["call"]["call_id"] == "g2"


def test_provider_failure_mid_run_leaves_one_sanitized_terminal_after_the_saved_partial(tmp_path):
    provider = ScriptedProvider(
        [
            calls(("a", "echo", {"text": "1"}), text="Working on it."),
            ProviderHTTPError('bad gateway: Authorization: Bearer sk-abcdefghijkl {"raw": 1}', status=502),
        ]
    )
    config = load_config(env={})
    store = Store(str(tmp_path / "db.sqlite"))
    manager = RunEngine(store, config)
    settings = AgentSettings()
    hooks = AgentHooks(
        request_approval=lambda *a: {},
        tool_context=lambda ctx: ToolContext(owner=ctx.owner, session_id=ctx.session_id, cancel=ctx.cancel, config={}),
    )
    session = store.sessions.create("local")["id"]
    state = initial_state([{"role": "user", "content": "go"}], settings)
    from odysseus.agent.agent_loop import agent_turn

    turn = agent_turn([Candidate(provider, "script-1")], ToolRegistry([echo_tool()]), settings, hooks, state)
    run = manager.start(
        StartSpec(
            owner="local",
            session_id=session,
            make_turn=lambda history: turn,
            mode="agent",
            model="scripted/script-1",
            message="go",
            terminal_type="agent_terminal",
        )
    ).run
    assert run.settled.wait(10)
    manager.close()
    events = [e for e, _ in run.log.read_after(0)]
    names = kinds(events)
    assert names.count("agent_terminal") == 1
    assert names.index("message_saved") < names.index("agent_terminal") < names.index("error")
    terminal = of(events, "agent_terminal")[0].data["data"]
    assert terminal["status"] == "error" and terminal["completion"] == "failed"
    assert terminal["rounds"][0]["text"] == "Working on it." and terminal["rounds"][1]["round"] == 2
    assert terminal["routes"] == ["scripted/script-1"] and terminal["tool_calls"] == 1
    assert terminal["failure"]["status"] == 502 and terminal["failure"]["round"] == 2
    blob = str(terminal) + str(of(events, "error")[0].data)
    assert "sk-abcdefghijkl" not in blob and '"raw"' not in blob
    saved = store.messages.get("local", terminal["message_id"])
    assert saved["content"] == "Working on it." and saved["metadata"]["agent"]["tools"][0]["call_id"] == "a"


def test_guards_units():
    assert announces_action("Sure. Let me search for the latest release notes.")
    assert announces_action("I'll run a quick check:")
    assert not announces_action("The answer is 42. Let me know if you need anything else.")
    assert not announces_action("Paris is the capital of France.")
    breaker = LoopBreaker(2)
    assert breaker.observe(1, ["a:1"], "") is None
    assert breaker.observe(2, ["a:1", "b:2"], "")["signature"] == "a:1"
    assert LoopBreaker(2, [[1, ["a:1"], True]]).observe(3, ["a:1"], "") is None  # not consecutive
    cleaned = sanitize("401 from upstream: api_key=sk-secret123456 Bearer abcdefghijklmnop")
    assert "sk-secret" not in cleaned and "abcdefghijklmnop" not in cleaned
