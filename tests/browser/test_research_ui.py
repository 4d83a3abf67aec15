"""Research jobs in the page against the real server, the task-aware scripted model, a SearXNG
stand-in and local pages: the Research toggle, the progress panel live and after a reload
mid-job (rebuilt the same by replaying the run), the report's clickable citations, the saved
reply after a reload, and the research list (re-open, delete).
"""

from __future__ import annotations

import pytest
import requests
from browser_helpers import open_app, shot
from liveserver import LiveServer
from research_fakes import ResearchModel, Site
from searxng import searxng

PAGES = {"/p1": ("Ithaca harbour", "Ithaca has a harbour. " * 10), "/p2": ("Ithaca hills", "Ithaca has hills. " * 10)}
PANEL = """() => { const p = document.querySelector('#messages .msg.assistant:last-of-type .research-panel');
  return p && { phase: p.dataset.phase, head: p.querySelector('.research-phase').innerText,
    counts: p.querySelector('.research-counts').innerText,
    sources: [...p.querySelectorAll('.research-sources a')].map(a => [a.innerText, a.href]),
    findings: [...p.querySelectorAll('.research-findings li')].map(li => li.textContent),
    warnings: p.querySelector('.research-warnings').innerText }; }"""


@pytest.fixture(scope="module")
def model():
    with ResearchModel() as server:
        yield server


@pytest.fixture(scope="module")
def site():
    server = Site(PAGES)
    yield server
    server.close()


@pytest.fixture(scope="module")
def research_server(model, site, tmp_path_factory):
    with searxng(lambda query: site.rows("/p1", "/p2")) as search_url:
        server = LiveServer(
            str(tmp_path_factory.mktemp("researchpage")),
            {
                "ODYSSEUS_AUTH": "none",
                "OPENAI_BASE_URL": model.url + "/v1",
                "OPENAI_API_KEY": "sk-x",
                "OPENAI_MODEL": "scripted",
                "ODYSSEUS_WEB_SEARCH_BACKEND": "searxng",
                "ODYSSEUS_SEARXNG_URL": search_url,
                "ODYSSEUS_FETCH_ALLOWED_NETWORKS": "127.0.0.1/32",
                "ODYSSEUS_HEARTBEAT_INTERVAL": "0.5",
                "ODYSSEUS_EVICT_GRACE": "60",
                "ODYSSEUS_RESEARCH_PROGRESS_INTERVAL": "60",
            },
        ).start()
        yield server
        server.stop()


def test_panel_live_after_a_reload_mid_job_and_from_history(research_server, page, site, model):
    model.set()
    site.delays["/p2"] = 8.0  # the job waits here: reload while it does
    open_app(page, research_server.url)
    page.check("#research-toggle")
    page.fill("#input", "Tell me about Ithaca")
    page.press("#input", "Enter")
    page.wait_for_function("() => document.querySelector('.research-panel')?.dataset.phase === 'reading'")
    page.wait_for_timeout(300)
    live = page.evaluate(PANEL)
    assert live["counts"] == "1 source · 1 finding" and live["head"] == "Reading · round 1: Ithaca harbour"
    assert live["sources"] == [["Ithaca harbour", site.url + "/p1"]]
    shot(page, "research-panel-live")
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    page.wait_for_function(
        "() => document.querySelector('.research-panel .research-counts')?.innerText === '1 source · 1 finding'"
    )
    assert page.evaluate(PANEL) == live  # the same panel, rebuilt by replaying the run from its start
    assert page.is_checked("#research-toggle")  # remembered
    # the job goes on after the reload and ends with the cited report
    page.wait_for_function("() => document.querySelector('.research-panel')?.dataset.phase === 'done'", timeout=30000)
    page.wait_for_selector("#messages .msg.assistant[data-outcome=ok]")
    done = page.evaluate(PANEL)
    assert done["counts"] == "2 sources · 2 findings" and len(done["sources"]) == 2
    citations = page.eval_on_selector_all(
        ".msg.assistant .segment a.citation", "els => els.map(a => [a.innerText, a.href])"
    )
    urls = dict(done["sources"])
    assert citations == [["[1]", done["sources"][0][1]], ["[2]", done["sources"][1][1]]]
    assert set(urls.values()) == {site.url + "/p1", site.url + "/p2"}
    assert page.locator(".msg.assistant .segment h2", has_text="Sources").count() == 1
    shot(page, "research-report")
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    page.wait_for_selector(".msg.assistant .research-panel[data-phase=done]")
    restored = page.evaluate(PANEL)
    assert restored["sources"] == done["sources"] and restored["counts"] == done["counts"]
    assert sorted(restored["findings"]) == sorted(done["findings"])
    assert (
        page.eval_on_selector_all(".msg.assistant .segment a.citation", "els => els.map(a => [a.innerText, a.href])")
        == citations
    )


def test_research_list_reopens_and_deletes(research_server, page, site, model):
    model.set()
    site.delays.clear()
    started = requests.post(
        research_server.url + "/api/research/start", json={"query": "Ithaca walls"}, timeout=10
    ).json()
    with requests.get(
        f"{research_server.url}/api/research/stream/{started['job_id']}", stream=True, timeout=30
    ) as stream:
        for _ in stream.iter_content(chunk_size=None):
            pass
    open_app(page, research_server.url)
    page.click("#chat-menu")  # Research jobs is in the header's one menu
    page.click(".popup-menu .menu-research-jobs")
    row = page.locator(f".research-jobs li[data-job-id='{started['job_id']}']")
    row.wait_for()
    assert "Ithaca walls" in row.inner_text() and "done" in row.inner_text()
    page.fill(".research-search", "walls")
    page.wait_for_function("() => document.querySelectorAll('.research-jobs li[data-job-id]').length === 1")
    shot(page, "research-list")
    row.locator("button.open").click()
    page.wait_for_selector(".msg.assistant .research-panel[data-phase=done]")
    assert started["session_id"] in page.url
    assert page.locator(".msg.user .msg-body").inner_text() == "Ithaca walls"
    page.click("#chat-menu")  # Research jobs is in the header's one menu
    page.click(".popup-menu .menu-research-jobs")
    row = page.locator(f".research-jobs li[data-job-id='{started['job_id']}']")
    row.wait_for()
    page.once("dialog", lambda dialog: dialog.accept())
    row.locator("button.delete").click()
    row.wait_for(state="detached")
    assert requests.get(f"{research_server.url}/api/research/{started['job_id']}", timeout=10).status_code == 404
