"""Lifecycle hooks live on each app's run engine (``runs/hooks.py``), not in the process: three apps in
one process each keep exactly their own receivers, and one app's runs never reach another's."""

from __future__ import annotations

from apphelpers import close_app
from waiting import wait_for

from odysseus import create_app
from odysseus.runs.hooks import Hook


def _app(tmp_path, name):
    return create_app({"DATA_DIR": str(tmp_path / name), "DEMO_TOKEN_DELAY": 0.001, "PROVIDERS": [], "AUTH": "none"})


def test_three_apps_each_have_their_own_receivers_and_see_only_their_own_runs(tmp_path):
    apps = [_app(tmp_path, name) for name in ("a", "b", "c")]
    try:
        for app in apps:
            ext = app.extensions
            hooks = ext["odysseus.runs"].hooks
            # exactly this app's parts: research jobs, memory extraction, titles (no receiver of another app)
            owners = [receiver.__self__ for receiver in hooks.run_finished.receivers]
            assert len(owners) == 3
            assert set(owners) == {ext["odysseus.research"], ext["odysseus.memory_extractor"], ext["odysseus.titles"]}
            assert [r.__self__ for r in hooks.run_started.receivers] == [ext["odysseus.research"]]
            assert {r.__self__ for r in hooks.session_deleted.receivers} == {
                ext["odysseus.agent"],
                ext["odysseus.documents"],
                ext["odysseus.research"],
            }
        seen = {name: [] for name in ("a", "b", "c")}
        for name, app in zip(seen, apps, strict=True):
            hooks = app.extensions["odysseus.runs"].hooks
            for hook in (hooks.run_started, hooks.run_finished, hooks.message_saved, hooks.session_deleted):
                hook.connect(lambda *args, name=name, hook=hook, **kwargs: seen[name].append(hook.name))
        client = apps[0].test_client()
        response = client.post("/api/chat_stream", json={"message": "only in a"})
        assert response.status_code == 200 and response.get_data()
        wait_for(lambda: "run_finished" in seen["a"], what="a's run_finished")
        session_id = response.headers["X-Odysseus-Session-Id"]
        assert client.delete(f"/api/sessions/{session_id}").status_code == 200
        assert seen["a"] == ["run_started", "message_saved", "run_finished", "session_deleted"]
        assert seen["b"] == [] and seen["c"] == []
    finally:
        for app in apps:
            close_app(app)


def test_a_hook_calls_its_receivers_in_order_once_each_until_disconnected():
    hook, calls = Hook("run_finished"), []

    def first(run):
        calls.append(("first", run))

    def second(run):
        calls.append(("second", run))

    hook.connect(first)
    hook.connect(second)
    hook.connect(first)  # once only
    hook.send("r1")
    hook.disconnect(first)
    hook.send("r2")
    assert calls == [("first", "r1"), ("second", "r1"), ("second", "r2")]
