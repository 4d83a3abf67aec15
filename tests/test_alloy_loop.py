"""The workflow loop in-process, one scripted provider per agent: limits, refusals, pauses, the saved record.

The real-wire behaviour (concurrency over sockets, stop closing connections, resume) is in
test_alloy_e2e.py; this file pins the loop's rules where a scripted in-process provider is enough.
"""

from __future__ import annotations

import threading
import time

import pytest
from agent_fakes import ScriptedProvider, calls, echo_tool, say

from odysseus.agent.agent_loop import AgentHooks, Resolution, initial_state
from odysseus.agent.guards import AgentSettings
from odysseus.alloy.plan import AgentFactory, AlloySettings
from odysseus.alloy.workflow_loop import workflow_turn
from odysseus.cancel import CancelToken, Cancelled
from odysseus.errors import NotFound
from odysseus.llm.llm_core import Candidate
from odysseus.runs.run import RunContext
from odysseus.tools.registry import ToolContext, ToolRegistry


def delegate(call_id, agent_id, task):
    return (call_id, "delegate_to", {"agent_id": agent_id, "task": task})


class World:
    """A workflow boss -> (alpha, beta), each agent answered by its own scripted provider."""

    def __init__(self, scripts, tools=None, members=None, **limits):
        self.providers = {name: ScriptedProvider(steps, name=name) for name, steps in scripts.items()}
        self.registry = ToolRegistry(tools or [echo_tool(), echo_tool(True, "guarded")])
        self.settings = AgentSettings(progress_interval=0.1)
        self.limits = AlloySettings(**{"max_depth": 1, "max_parallel": 3, "timeout": 5.0, "max_rounds": 4, **limits})
        self.approvals = {}
        self.hooks = AgentHooks(request_approval=self._approval, tool_context=self._tool_ctx)
        members = members or [
            {"agent_id": "boss", "role": "supervisor"},
            {"agent_id": "alpha", "role": "specialist", "delegation_hint": "does A"},
            {"agent_id": "beta", "role": "specialist"},
        ]
        agents = {
            m["agent_id"]: {
                "model": f"{m['agent_id']}/script-1",
                "system_prompt": f"I am {m['agent_id']}",
                "tools": None,
                "temperature": None,
                "name": m["agent_id"],
            }
            for m in members
        }
        self.plan = {
            "workflow": {"id": "wf", "name": "Test", "supervisor_agent_id": "boss", "members": members},
            "agents": agents,
        }

    def _approval(self, ctx, call, state):
        approval_id = f"apr_{len(self.approvals) + 1}"
        self.approvals[approval_id] = {"call": call, "state": state}
        return {"approval_id": approval_id, "expires_at": 1e12}

    def _tool_ctx(self, ctx):
        return ToolContext(owner=ctx.owner, session_id=ctx.session_id, cancel=ctx.cancel, config={})

    def resolve(self, model):
        name = model.split("/")[0]
        if name not in self.providers:
            raise NotFound(f"unknown model {model!r}")
        return [Candidate(self.providers[name], "script-1")]

    def run(self, state=None, resolution=None, cancel=None, prompt="do the thing"):
        factory = AgentFactory(
            self.plan, self.resolve, self.resolve("boss/x"), self.registry, self.settings, self.limits
        )
        setup = factory.setup("boss", 0)
        if state is None:
            state = initial_state([{"role": "user", "content": prompt}], setup.settings)
            state["alloy"] = self.plan
        ctx = RunContext("run_t", "s_t", "local", cancel or CancelToken())
        events = list(workflow_turn(factory, setup, self.hooks, state, resolution)(ctx))
        return events, ctx


def of(events, kind):
    return [e for e in events if e.type == kind]


def test_delegation_result_is_the_tool_result_and_the_specialist_sees_only_its_task():
    world = World(
        {"boss": [calls(delegate("c1", "alpha", "count to three")), say("Alpha says 1 2 3.")], "alpha": [say("1 2 3")]}
    )
    events, ctx = world.run()
    kinds = [e.type for e in events]
    assert kinds.index("delegation_start") < kinds.index("delegation_chunk") < kinds.index("delegation_complete")
    start = of(events, "delegation_start")[0].data
    assert start["target_agent_id"] == "alpha" and start["depth"] == 1 and start["tool_call_id"] == "c1"
    assert start["supervisor_agent_id"] == "boss" and start["task"] == "count to three"
    done = of(events, "delegation_complete")[0].data
    assert done["status"] == "success" and done["result_preview"] == "1 2 3"
    assert done["tokens_input"] == 10 and done["tokens_output"] == 5
    assert done["delegation_id"] == start["delegation_id"]
    sent = world.providers["alpha"].requests[0].messages
    assert [m["role"] for m in sent] == ["system", "user"] and sent[1]["content"] == "count to three"
    assert "I am alpha" in sent[0]["content"] and "do the thing" not in str(sent)
    assert all(t["function"]["name"] != "delegate_to" for t in world.providers["alpha"].requests[0].tools or [])
    second = world.providers["boss"].requests[1].messages
    assert second[-1] == {"role": "tool", "tool_call_id": "c1", "content": "1 2 3"}
    record = ctx.metadata["delegations"][0]
    assert record["status"] == "success" and record["content"] == "1 2 3" and record["target_agent_id"] == "alpha"
    assert ctx.terminal["usage_total"] == {"input_tokens": 30, "output_tokens": 15}  # boss twice + alpha
    assert ctx.metadata["alloy"]["workflow_id"] == "wf"
    boss_tools = world.providers["boss"].requests[0].tools
    spec = next(t for t in boss_tools if t["function"]["name"] == "delegate_to")
    assert spec["function"]["parameters"]["properties"]["agent_id"]["enum"] == ["alpha", "beta"]
    assert "alpha: does A" in spec["function"]["description"]


def test_refusals_self_unknown_missing_task_and_depth_send_only_a_failed_complete():
    world = World(
        {
            "boss": [
                calls(
                    delegate("c1", "boss", "me"),
                    delegate("c2", "nobody", "x"),
                    ("c3", "delegate_to", {"agent_id": "alpha"}),
                    delegate("c4", "alpha", "go deeper"),
                ),
                say("ok"),
            ],
            "alpha": [calls(delegate("n1", "beta", "nested")), say("alpha done")],
            "beta": [],
        }
    )
    events, ctx = world.run()
    completes = of(events, "delegation_complete")
    by_call = {e.data["tool_call_id"]: e.data for e in completes}
    assert "cannot delegate to itself" in by_call["c1"]["error"] and by_call["c1"]["refused"]
    assert "not a specialist" in by_call["c2"]["error"]
    assert "task must be" in by_call["c3"]["error"]
    assert by_call["n1"]["status"] == "failed" and "depth limit (1)" in by_call["n1"]["error"]
    assert by_call["n1"]["parent_delegation_id"] == by_call["c4"]["delegation_id"]
    assert by_call["c4"]["status"] == "success"
    starts = of(events, "delegation_start")
    assert [s.data["tool_call_id"] for s in starts] == ["c4"]  # refusals have no start
    assert not world.providers["beta"].requests  # never ran
    tool_msgs = [m for m in world.providers["boss"].requests[1].messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["c1", "c2", "c3", "c4"]
    assert tool_msgs[0]["content"].startswith("Error: the delegation was refused")
    assert len(ctx.metadata["delegations"]) == 5


def test_depth_two_nests_but_never_goes_back_up_the_chain():
    world = World(
        {
            "boss": [calls(delegate("c1", "alpha", "lead")), say("fine")],
            "alpha": [
                calls(delegate("u1", "boss", "up"), delegate("s1", "alpha", "self"), delegate("n1", "beta", "sub")),
                say("alpha summary"),
            ],
            "beta": [calls(delegate("b1", "alpha", "back")), say("beta leaf")],
        },
        max_depth=2,
    )
    events, ctx = world.run()
    by_call = {e.data["tool_call_id"]: e.data for e in of(events, "delegation_complete")}
    assert "above alpha" in by_call["u1"]["error"] or "not a specialist" in by_call["u1"]["error"]
    assert "itself" in by_call["s1"]["error"]
    assert by_call["n1"]["status"] == "success" and by_call["n1"]["result_preview"] == "beta leaf"
    assert "depth limit (2)" in by_call["b1"]["error"]
    nested = next(e.data for e in of(events, "delegation_start") if e.data["tool_call_id"] == "n1")
    top = next(e.data for e in of(events, "delegation_start") if e.data["tool_call_id"] == "c1")
    assert nested["depth"] == 2 and nested["parent_delegation_id"] == top["delegation_id"]
    assert nested["supervisor_agent_id"] == "alpha"
    records = {r["tool_call_id"]: r for r in ctx.metadata["delegations"]}
    assert records["n1"]["parent_delegation_id"] == top["delegation_id"]


def test_parallel_limit_and_concurrency():
    running, peak, lock = [0], [0], threading.Lock()

    def slow(text):
        def step(request):
            with lock:
                running[0] += 1
                peak[0] = max(peak[0], running[0])
            time.sleep(0.3)  # the scenario: a specialist busy for 0.3 s
            with lock:
                running[0] -= 1
            return say(text)

        return step

    world = World(
        {
            "boss": [
                calls(*[delegate(f"c{i}", "alpha" if i % 2 else "beta", f"t{i}") for i in range(5)]),
                say("all done"),
            ],
            "alpha": [slow("a")] * 3,
            "beta": [slow("b")] * 3,
        },
        max_parallel=2,
    )
    started = time.monotonic()
    events, ctx = world.run()
    assert peak[0] == 2
    assert time.monotonic() - started < 1.5 * 3  # 5 tasks of 0.3 s, two at a time: well under serial time
    assert [e.data["status"] for e in of(events, "delegation_complete")] == ["success"] * 5
    # each delegation's events stay in order: start before its chunks before its complete
    for start in of(events, "delegation_start"):
        mine = [e.type for e in events if e.data.get("delegation_id") == start.data["delegation_id"]]
        assert mine[0] == "delegation_start" and mine[-1] == "delegation_complete"


@pytest.mark.slow  # measured 2.5 s: waits out a specialist's time limit
def test_timeout_and_failing_specialist():
    def hang(request):
        time.sleep(3)  # the scenario: a specialist that outlives its time limit
        return say("too late")

    from odysseus.errors import ProviderHTTPError

    world = World(
        {
            "boss": [calls(delegate("c1", "alpha", "hang"), delegate("c2", "beta", "fail")), say("done")],
            "alpha": [hang],
            "beta": [ProviderHTTPError("boom upstream", status=500)],
        },
        timeout=0.5,
    )
    events, ctx = world.run()
    by_call = {e.data["tool_call_id"]: e.data for e in of(events, "delegation_complete")}
    assert by_call["c1"]["status"] == "failed" and "timed out after 0.5 s" in by_call["c1"]["error"]
    assert by_call["c2"]["status"] == "failed" and "boom upstream" in by_call["c2"]["error"]
    tool_msgs = {
        m["tool_call_id"]: m["content"] for m in world.providers["boss"].requests[1].messages if m["role"] == "tool"
    }
    assert "timed out" in tool_msgs["c1"] and "failed" in tool_msgs["c2"]
    assert ctx.terminal["completion"] == "complete"


def test_stop_cancels_every_child_and_marks_records_stopped():
    tokens = []

    def wait_forever(request):
        return []  # replaced below

    cancel = CancelToken()
    world = World({"boss": [calls(delegate("c1", "alpha", "a"), delegate("c2", "beta", "b"))], "alpha": [], "beta": []})
    for name in ("alpha", "beta"):
        provider = world.providers[name]

        def stream(request, token, provider=provider):
            tokens.append(token)
            provider.requests.append(request)
            token.wait(10)
            yield from ()

        provider.stream = stream
    threading.Timer(0.5, lambda: cancel.cancel("stopped")).start()
    try:
        world.run(cancel=cancel)
        raise AssertionError("the turn should have raised Cancelled")
    except Cancelled:
        pass
    assert len(tokens) == 2 and all(t.cancelled for t in tokens)


def test_specialist_approval_pauses_the_workflow_and_the_answer_resumes_it():
    world = World(
        {
            "boss": [calls(delegate("c1", "alpha", "guard it"), delegate("c2", "beta", "plain")), say("Both done.")],
            "alpha": [calls(("g1", "guarded", {"text": "hi"})), say("guarded ran")],
            "beta": [say("beta ok")],
        }
    )
    events, ctx = world.run()
    ask = of(events, "ask_user")[0].data["data"]
    assert ask["target_agent_id"] == "alpha" and ask["approval_id"] == "apr_1" and ask["tool"] == "guarded"
    assert ctx.terminal["completion"] == "awaiting_approval"
    by_target = {r["target_agent_id"]: r for r in ctx.metadata["delegations"]}
    assert by_target["alpha"]["status"] == "awaiting_approval" and by_target["beta"]["status"] == "success"
    assert ctx.metadata["agent"]["awaiting_approval"]["target_agent_id"] == "alpha"
    stored = world.approvals["apr_1"]
    assert stored["call"]["name"] == "guarded" and stored["state"]["alloy"]["paused"]["agent_id"] == "alpha"
    assert [c["id"] for c in stored["state"]["pending"]] == ["c1"]

    events2, ctx2 = world.run(state=stored["state"], resolution=Resolution("apr_1", "approve", stored["call"]))
    kinds = [e.type for e in events2]
    assert kinds.index("delegation_start") < kinds.index("tool_approval_resolved") < kinds.index("delegation_complete")
    start = of(events2, "delegation_start")[0].data
    assert start["resumed"] is True and start["delegation_id"] == by_target["alpha"]["delegation_id"]
    result = of(events2, "delegation_tool_result")[0].data
    assert result["content"] == "echo: hi" and result["success"] is True
    assert of(events2, "delegation_complete")[0].data["result_preview"] == "guarded ran"
    final = world.providers["boss"].requests[-1].messages
    tool_msgs = {m["tool_call_id"]: m["content"] for m in final if m["role"] == "tool"}
    assert tool_msgs == {"c2": "beta ok", "c1": "guarded ran"}
    assert ctx2.terminal["completion"] == "complete"
    assert ctx2.metadata["agent"]["approval"]["target_agent_id"] == "alpha"


def test_continue_after_the_supervisors_round_limit_keeps_the_workflow():
    world = World(
        {
            "boss": [calls(delegate("c1", "alpha", "first")), say("finished after continue")],
            "alpha": [say("alpha result")],
        }
    )
    world.settings = AgentSettings(progress_interval=0.1, max_rounds=1)
    events, ctx = world.run()
    assert ctx.terminal["completion"] == "rounds_exhausted"
    saved = ctx.metadata["agent"]["continuation"]
    assert saved["alloy"]["workflow"]["id"] == "wf" and saved["pending"] == []
    events2, ctx2 = world.run(state=saved)
    assert ctx2.terminal["completion"] == "complete"
    last = world.providers["boss"].requests[-1]
    assert any(t["function"]["name"] == "delegate_to" for t in last.tools)  # still the workflow's supervisor
    assert {"role": "tool", "tool_call_id": "c1", "content": "alpha result"} in last.messages
