"""The research turn generator against a task-aware scripted model, a SearXNG stand-in and local pages.

No Flask and no server of ours: the generator is driven as the run engine drives it, so these
tests pin the phase order, the round logic, every limit, and the partial report on time-up,
on cancel and on a failed synthesis.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from research_fakes import ResearchModel, Site, page_url, task_of, user_text
from scripted_model import reply
from searxng import searxng

from odysseus.cancel import CancelToken
from odysseus.config import DEFAULTS
from odysseus.errors import BadRequest
from odysseus.events import DELTA, RESEARCH_DONE, RESEARCH_FINDINGS, RESEARCH_PROGRESS, RESEARCH_SOURCES
from odysseus.llm.base import ProviderConfig
from odysseus.llm.llm_core import Candidate
from odysseus.llm.openai_compat import OpenAICompatProvider
from odysseus.research import prompts, report
from odysseus.research.limits import ResearchLimits
from odysseus.research.model import ResearchFailed
from odysseus.research.turn import research_turn
from odysseus.runs.run import RunContext

PAGES = {f"/p{i}": (f"Page {i}", f"Text of page {i}. " * 20) for i in range(1, 13)}


@pytest.fixture(scope="module")
def model():
    with ResearchModel() as server:
        yield server


@pytest.fixture(scope="module")
def site():
    server = Site(PAGES)
    yield server
    server.close()


@pytest.fixture
def search(site):
    """``search.rows`` is what every query answers (a list of paths, or a function of the query)."""
    holder = type("Search", (), {})()
    holder.rows = ["/p1", "/p2"]
    holder.queries = []

    def answer(query):
        holder.queries.append(query)
        rows = holder.rows(query) if callable(holder.rows) else holder.rows
        return None if rows is None else site.rows(*rows)

    with searxng(answer) as url:
        holder.url = url
        yield holder


@pytest.fixture(autouse=True)
def fresh(model, site):
    model.set()
    site.delays.clear()
    site.hits.clear()
    site.most_active = 0


def run(model, search, cancel=None, question="What about alpha?", after=None, **settings):
    """Drive the turn to its end like the engine; returns (events, ctx, error)."""
    config = {
        **DEFAULTS,
        "WEB_SEARCH_BACKEND": "searxng",
        "SEARXNG_URL": search.url,
        "FETCH_ALLOWED_NETWORKS": "127.0.0.1/32",
        "RESEARCH_PROGRESS_INTERVAL": 5.0,
        **settings,
    }
    provider = OpenAICompatProvider(
        ProviderConfig(
            name="scripted", kind="openai", base_url=model.url + "/v1", api_key="sk-test", default_model="scripted"
        ),
        config,
    )
    limits = ResearchLimits.from_request(config, settings.get("request"))
    ctx = RunContext("run_test", "sess_test", "local", cancel or CancelToken())
    events, error = [], None
    try:
        for event in research_turn([Candidate(provider, "scripted")], question, limits, config)(ctx):
            events.append(event)
            if after:
                after(event)
            if ctx.cancel.cancelled:
                break  # the engine keeps one event after a stop, then ends the run
    except Exception as exc:  # noqa: BLE001 - a test looks at what the engine would see
        error = exc
    return events, ctx, error


def phases(events):
    """The phases in order, repeats (re-announcements while waiting) folded."""
    out = []
    for event in events:
        if event.type == RESEARCH_PROGRESS:
            phase = event.data["data"]["phase"]
            if not out or out[-1] != phase or phase == "reading":
                out.append(phase)
    return out


def rows(events, phase):
    """The progress rows of one phase."""
    return [e.data["data"] for e in events if e.type == RESEARCH_PROGRESS and e.data["data"]["phase"] == phase]


def content(events):
    return "".join(e.data["delta"] for e in events if e.type == DELTA)


def test_phase_order_final_rows_and_cited_report(model, search, site):
    events, ctx, error = run(model, search)
    assert error is None
    assert phases(events) == ["probing", "planning", "searching", "reading", "reading", "analyzing", "writing"]
    kinds = [e.type for e in events if e.type != RESEARCH_PROGRESS]
    assert kinds[:2] == [RESEARCH_SOURCES, RESEARCH_FINDINGS] and kinds[-1] == RESEARCH_DONE
    assert set(kinds[2:-1]) == {DELTA}
    sources = events[[e.type for e in events].index(RESEARCH_SOURCES)].data["data"]
    assert sorted(s["url"] for s in sources) == [site.url + "/p1", site.url + "/p2"]
    assert all(s["title"].startswith("Page ") for s in sources)
    findings = events[[e.type for e in events].index(RESEARCH_FINDINGS)].data["data"]
    assert {f["summary"] for f in findings} == {"Finding from p1", "Finding from p2"}
    text = content(events)
    assert text.startswith("## Answer") and "Alpha is first [1]" in text
    assert "## Sources" in text and f"({site.url}/p1)" in text.replace("<", "(").replace(">", ")") or site.url in text
    research = ctx.metadata["research"]
    assert research["job_id"] == "run_test" and research["sources"] == sources and research["findings"] == findings
    assert research["partial"] is False and ctx.terminal["research"]["partial"] is False
    assert events[-1].data["data"] == {"job_id": "run_test", "session_id": "sess_test"}
    reading = rows(events, "reading")
    assert [r["total_sources"] for r in reading] == [1, 2] and [r["new_sources"] for r in reading] == [1, 2]
    assert all(r["round"] == 1 and r["url"].startswith(site.url) for r in reading)
    searching = rows(events, "searching")[0]
    assert searching == {"phase": "searching", "round": 1, "queries": ["alpha query", "beta query"], "total_sources": 0}
    assert model.tasks()[:2] == ["probe", "plan"] and model.tasks()[-2:] == ["analyze", "write"]
    write = next(b for b in model.requests if task_of(b) == "write")
    assert "Finding from p1" in user_text(write) and "[1]" in user_text(write)


def test_stops_after_two_rounds_that_add_nothing(model, search):
    # The model always wants more, but every query finds the same two pages.
    model.set(analyze=reply('{"continue": true, "queries": ["more"]}'))
    events, ctx, error = run(model, search, request={"max_rounds": 0})
    assert error is None
    rounds = rows(events, "analyzing")
    assert [(r["round"], r["new_findings"]) for r in rounds] == [(1, 2), (2, 0), (3, 0)]
    assert ctx.metadata["research"]["stats"]["ended_by"] == "no_new_findings"
    assert phases(events).count("reading") == 2


def test_max_rounds_pages_per_round_chars_and_concurrency(model, search, site):
    fresh = iter([f"/p{i}" for i in range(1, 13)])
    search.rows = lambda query: [next(fresh) for _ in range(3)]
    model.set(analyze=lambda body: reply(json.dumps({"continue": True, "queries": [f"q{len(model.requests)}"]})))
    for path in PAGES:
        site.delays[path] = 0.4
    events, ctx, error = run(
        model, search, request={"max_rounds": 2, "pages_per_round": 2, "chars_per_page": 500, "concurrent_reads": 2}
    )
    assert error is None
    analyzing = [r["round"] for r in rows(events, "analyzing")]
    assert analyzing == [1, 2] and ctx.metadata["research"]["stats"]["ended_by"] == "max_rounds"
    reading = rows(events, "reading")
    assert [r["round"] for r in reading] == [1, 1, 2, 2]
    assert site.most_active == 2  # two at once, never three
    extracts = [b for b in model.requests if task_of(b) == "extract"]
    assert len(extracts) == 4
    for body in extracts:
        page_text = user_text(body).split("Page text:\n", 1)[1]
        assert 0 < len(page_text) <= 500
    # analyze after round 2 is not asked: the limit decides
    assert model.tasks().count("analyze") == 1


def test_min_rounds_outvotes_an_early_stop(model, search):
    search.rows = lambda query: ["/p3"] if query == "alpha query" else ["/p4"] if "more" in query else ["/p1"]
    model.set(
        analyze=[reply('{"continue": false, "queries": ["more alpha"]}'), reply('{"continue": false, "queries": []}')]
    )
    events, ctx, error = run(model, search, request={"min_rounds": 2})
    assert error is None
    assert [r["round"] for r in rows(events, "analyzing")] == [1, 2]
    assert ctx.metadata["research"]["stats"]["ended_by"] == "model_done"
    assert "more alpha" in search.queries


@pytest.mark.slow  # measured 2 s: waits out the research time limit
def test_time_limit_keeps_what_was_found_and_writes_a_partial_report(model, search, site):
    search.rows = ["/p1", "/p2"]
    site.delays["/p2"] = 30  # never arrives in time
    started = time.monotonic()
    events, ctx, error = run(model, search, RESEARCH_MAX_TIME=4.0, RESEARCH_WRITE_SHARE=0.5)
    assert error is None
    assert time.monotonic() - started < 15
    research = ctx.metadata["research"]
    assert research["partial"] is True and research["stats"]["ended_by"] == "time"
    assert [s["url"] for s in research["sources"]] == [site.url + "/p1"]
    assert any("time limit" in r["message"] for r in rows(events, "warning"))
    assert "writing" in phases(events) and content(events).startswith("## Answer")  # the model still wrote it
    assert events[-1].type == RESEARCH_DONE


@pytest.mark.slow  # measured 6 s: waits out the synthesis time limit
def test_synthesis_that_times_out_falls_back_to_the_findings(model, search):
    model.set(write=reply("too late", delay=20))
    events, ctx, error = run(model, search, RESEARCH_MAX_TIME=6.0, RESEARCH_WRITE_SHARE=0.5)
    assert error is None
    text = content(events)
    assert text.startswith("# Research: What about alpha?") and "Partial report" in text
    assert "- Finding from p1 [" in text and "## Sources" in text
    assert ctx.metadata["research"]["partial"] is True


def test_failing_synthesis_gives_the_deterministic_fallback(model, search):
    model.set(write=reply(status=500, error_body='{"error": {"message": "model crashed"}}'))
    one_at_a_time = {"concurrent_reads": 1}  # the same pages in the same order both times
    events, ctx, error = run(model, search, request=one_at_a_time)
    assert error is None
    text = content(events)
    again, _, _ = run(model, search, request=one_at_a_time)
    assert content(again) == text  # deterministic: same findings, same report
    assert "Partial report: the model could not write the report" in text
    assert "Finding from p1" in text and "Finding from p2" in text
    warnings = [r["message"] for r in rows(events, "warning")]
    assert any("could not be written" in w for w in warnings)
    assert ctx.metadata["research"]["partial"] is True and events[-1].type == RESEARCH_DONE


def test_cancel_mid_reading_ends_with_one_fallback_report(model, search, site):
    search.rows = ["/p1", "/p2"]
    site.delays["/p2"] = 30
    cancel = CancelToken()

    def after(event):
        if (
            event.type == RESEARCH_PROGRESS and event.data["data"]["phase"] == "reading"
        ):  # p1 is in: stop while p2 is still loading
            threading.Timer(0.2, cancel.cancel, args=("stopped",)).start()

    started = time.monotonic()
    events, ctx, error = run(model, search, cancel=cancel, after=after)
    assert error is None and time.monotonic() - started < 10
    assert events[-1].type == DELTA
    text = events[-1].data["delta"]
    assert "Partial report: the job was cancelled" in text and "Finding from p1" in text
    assert ctx.metadata["research"]["partial"] is True and ctx.metadata["research"]["stats"]["ended_by"] == "cancelled"


def test_probe_failures_end_the_job_with_an_error(model, search):
    search.rows = None  # the backend answers HTTP 500
    events, ctx, error = run(model, search)
    assert isinstance(error, ResearchFailed) and "search backend" in error.message
    assert events[-1].data["data"]["phase"] == "error"
    search.rows = ["/p1"]
    model.set(probe=reply(status=503, error_body="down"))
    events, ctx, error = run(model, search)
    assert isinstance(error, ResearchFailed) and "model does not answer" in error.message


def test_model_failures_mid_job_are_warnings(model, search, site):
    model.set(
        plan=reply(status=500, error_body="x"),
        extract=lambda body: (
            reply(status=500, error_body="x") if page_url(body).endswith("/p2") else reply('["Finding from p1"]')
        ),
    )
    events, ctx, error = run(model, search)
    assert error is None
    assert search.queries[1] == "What about alpha?"  # no plan: the question itself is searched
    findings = ctx.metadata["research"]["findings"]
    excerpt = next(f for f in findings if f["url"].endswith("/p2"))
    assert excerpt["excerpt"] is True and excerpt["summary"].startswith("Text of page 2.")
    warnings = [r["message"] for r in rows(events, "warning")]
    assert any("plan" in w for w in warnings) and any("kept an excerpt" in w for w in warnings)


def test_unreadable_pages_are_warnings_and_nothing_found_is_said_plainly(model, search, site):
    search.rows = ["/missing", "/p1"]
    model.set(extract=reply("[]"))
    events, ctx, error = run(model, search)
    assert error is None
    warnings = [r["message"] for r in rows(events, "warning")]
    assert any("/missing" in w and "404" in w for w in warnings)
    assert any("no findings" in w for w in warnings)
    text = content(events)
    assert "Partial report: nothing relevant was found" in text and "No findings were extracted" in text
    assert ctx.metadata["research"]["stats"]["pages_failed"] == 1
    assert "write" not in model.tasks()  # nothing to write from


@pytest.mark.slow  # measured 1.5 s: paced fake calls
def test_slow_calls_re_announce_their_phase(model, search):
    model.set(write=reply("## Late\n\nDone [1].", delay=1.5))
    events, _, error = run(model, search, RESEARCH_PROGRESS_INTERVAL=0.5)
    assert error is None
    writing = rows(events, "writing")
    assert len(writing) >= 2 and writing[0] == {"phase": "writing", "total_sources": 2}
    assert all(w["waiting"] > 0 for w in writing[1:])


def test_private_addresses_stay_refused_without_the_test_switch(model, search):
    events, ctx, error = run(model, search, FETCH_ALLOWED_NETWORKS="")
    assert error is None
    warnings = [r["message"] for r in rows(events, "warning")]
    assert sum("refused" in w for w in warnings) == 2 and ctx.metadata["research"]["sources"] == []


# ---------------------------------------------------------------- limits, parsers, report
@pytest.mark.parametrize(
    "field,value",
    [
        ("max_rounds", 21),
        ("max_rounds", -1),
        ("max_rounds", 1.5),
        ("max_time", 59),
        ("max_time", 3601),
        ("max_time", "soon"),
        ("max_time", True),
        ("pages_per_round", 0),
        ("chars_per_page", 10),
        ("concurrent_reads", 9),
        ("max_time", float("nan")),
    ],
)
def test_limits_reject_out_of_range_values(field, value):
    with pytest.raises(BadRequest):
        ResearchLimits.from_request(DEFAULTS, {field: value})


def test_limits_defaults_and_clamps():
    limits = ResearchLimits.from_request(DEFAULTS, {"max_rounds": "3", "max_time": 120})
    assert (limits.max_rounds, limits.max_time, limits.round_cap) == (3, 120.0, 3)
    auto = ResearchLimits.from_request(DEFAULTS, {})
    assert auto.max_rounds == 0 and auto.round_cap == DEFAULTS["RESEARCH_AUTO_ROUNDS"] and auto.max_time == 600
    assert ResearchLimits.from_request({**DEFAULTS, "RUN_WALL_TIMEOUT": 300}, {"max_time": 3600}).max_time == 270
    # slow local models get more time, and so do long prompts
    assert auto.timeout_for(10_000, local=True) == pytest.approx((90 + 10) * 3)
    assert auto.timeout_for(0, local=False) == 90


def test_parsers_are_lenient():
    assert prompts.string_list('Sure:\n```json\n["a", "b", "a"]\n```', 5) == ["a", "b"]
    assert prompts.string_list("1. first query\n- second query\n", 5) == ["first query", "second query"]
    assert prompts.string_list("[]", 5) == []
    assert prompts.decision('{"continue": "yes", "queries": ["x", 3]}', 2) == {"continue": True, "queries": ["x", "3"]}
    assert prompts.decision("No, that is enough.", 2) == {"continue": False, "queries": []}
    assert prompts.decision("hmm", 2) is None


def test_report_numbers_sources_and_neutralises_links():
    sources = [
        {"url": "https://a.example/x", "title": "A [evil](javascript:x)"},
        {"url": "https://b.example/y", "title": ""},
    ]
    text = report.finished("Body [1].\n\n## Sources\n1. junk", sources)
    assert text.count("## Sources") == 1 and "junk" not in text
    assert "1. [A (evil)(javascript:x)](https://a.example/x) (a.example)" in text
    assert "2. [https://b.example/y](https://b.example/y)" in text
