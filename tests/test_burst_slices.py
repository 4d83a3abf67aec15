"""How often a run's greenlet gives the hub back (engine ``_drive``, under gevent as the server runs it).

A paced provider blocks between its events, so each event costs one hub round trip (its read)
and no extra yield; a burst that never blocks still yields every ``BURST_SLICE``, so it cannot
hold the hub. Counted with greenlet's switch trace, in a child process with the monkey patch.
"""

from __future__ import annotations

import textwrap

from childscript import run_json


SCRIPT = textwrap.dedent(r"""
    from gevent import monkey
    monkey.patch_all()

    import json, sys, time
    import gevent, greenlet
    from odysseus.config import DEFAULTS
    from odysseus.events import delta
    from odysseus.runs.engine import BURST_SLICE, RunEngine, StartSpec
    from odysseus.store import Store

    data_dir, events = sys.argv[1], int(sys.argv[2])
    engine = RunEngine(Store(data_dir + "/odysseus.db"), dict(DEFAULTS, DATA_DIR=data_dir))
    hub = gevent.get_hub()

    def paced(history):
        def turn(ctx):
            for i in range(events):
                gevent.sleep(0.002)  # the provider's read blocks: the hub runs
                yield delta(f"p{i} ")
        return turn

    def burst(history):
        def turn(ctx):
            for i in range(events):
                end = time.perf_counter() + 0.0005  # half a millisecond of parsing, never blocking
                while time.perf_counter() < end:
                    pass
                yield delta(f"b{i} ")
        return turn

    out = {}
    for name, make_turn in (("paced", paced), ("burst", burst)):
        counted = [0]
        def trace(event, args, counted=counted):
            origin, target = args
            if event == "switch" and target is hub and getattr(origin, "_run", None) == engine._drive:
                counted[0] += 1
        greenlet.settrace(trace)
        started = engine.start(StartSpec(owner="local", session_id=None, mode="chat", model="demo/x",
                                         make_turn=make_turn, message="hi"))
        started.run.settled.wait(30)
        greenlet.settrace(None)
        out[name] = {"to_hub": counted[0], "status": started.run.status, "content": started.run.content}
    out["slice"] = BURST_SLICE
    engine.close()
    print(json.dumps(out))
""")


def test_a_paced_run_yields_once_per_event_and_a_burst_still_every_slice(tmp_path):
    events = 200
    out = run_json(SCRIPT, tmp_path, events)
    paced, burst = out["paced"], out["burst"]
    assert paced["status"] == burst["status"] == "done"
    assert paced["content"] == "".join(f"p{i} " for i in range(events))
    assert burst["content"] == "".join(f"b{i} " for i in range(events))
    # paced: the read's own round trip per event, plus a few for the start and the final save
    # (an extra yield per event, as before, made it about 2 per event)
    assert events <= paced["to_hub"] <= events * 1.25, out
    # burst: 100 ms of parsing with no blocking read still gave the hub back every slice
    burst_seconds = events * 0.0005
    assert burst["to_hub"] >= burst_seconds / out["slice"] / 2, out
