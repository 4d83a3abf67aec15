"""The model's window on the page against the real server and a scripted model with a tiny window:
the context meter, the "N of M messages sent" notice (live and after a reload) and the collapsible
summary divider of a compaction (live and after a reload)."""

from __future__ import annotations

import pytest
import requests
from browser_helpers import open_app, shot
from liveserver import LiveServer
from scripted_model import ScriptedModel, reply


@pytest.fixture(scope="module")
def model():
    with ScriptedModel() as scripted:
        scripted.prompt_tokens = lambda body: sum(len(m.get("content") or "") // 4 + 4 for m in body["messages"])
        yield scripted


@pytest.fixture(scope="module")
def site(model, tmp_path_factory):
    config = tmp_path_factory.mktemp("cfg") / "odysseus.toml"
    config.write_text(f'''
[[providers]]
name = "tiny"
kind = "openai"
base_url = "{model.url}/v1"
api_key = "sk-x"
models = [{{name = "scripted", context_length = 700}}]
''')
    server = LiveServer(
        str(tmp_path_factory.mktemp("windowpage")),
        {
            "ODYSSEUS_AUTH": "none",
            "ODYSSEUS_CONFIG": str(config),
            "ODYSSEUS_REPLY_RESERVE_TOKENS": "100",
            "ODYSSEUS_COMPACT_THRESHOLD": "0.5",
            "ODYSSEUS_COMPACT_MIN_MESSAGES": "4",
            "ODYSSEUS_HEARTBEAT_INTERVAL": "0.5",
        },
    ).start()
    yield server
    server.stop()


def seed(site, model, turns):
    session = None
    for n in range(turns):
        model.script(reply(f"A{n} " + "a" * 300))
        body = {"message": f"Q{n} " + "q" * 300, **({"session_id": session} if session else {})}
        with requests.post(site.url + "/api/chat_stream", json=body, stream=True, timeout=30) as response:
            session = response.headers["X-Odysseus-Session-Id"]
            for _ in response.iter_content(None):
                pass
    return session


def test_meter_divider_and_trimmed_notice(site, model, page):
    session = seed(site, model, 2)
    open_app(page, site.url, session)
    page.wait_for_selector("#context-meter:not([hidden])")
    assert "/ 700 tokens" in page.inner_text("#context-meter")
    first_share = float(page.get_attribute("#context-meter", "data-share"))
    assert 0.3 < first_share < 1

    model.script(reply("SUMMARY of Q0 and Q1"), reply("after the summary"))
    page.fill("#input", "Q2 " + "q" * 300)
    page.press("#input", "Enter")
    page.wait_for_selector(".msg.assistant[data-outcome=ok] >> text=after the summary")
    divider = page.locator(".summary-divider")
    assert divider.count() == 1 and "2 earlier messages summarised" in divider.inner_text()
    assert not page.is_visible(".summary-text")  # collapsed until opened
    divider.locator("summary").click()
    assert "SUMMARY of Q0 and Q1" in page.inner_text(".summary-text")
    page.wait_for_function("() => Number(document.querySelector('#context-meter').dataset.share) < %f" % first_share)

    page.reload()
    page.wait_for_selector(".msg.assistant >> text=after the summary")
    assert page.locator(".summary-divider").count() == 1  # the stored summary, as a divider
    assert page.locator(".msg.user").count() == 3  # the summarised messages are still shown
    shot(page, "window-divider")

    # a message bigger than the window: shortened, with the notice (live, then after a reload)
    model.script(reply("got the gist"))
    page.click("#new-chat")
    page.fill("#input", "LONG " + "z" * 4000)
    page.press("#input", "Enter")
    page.wait_for_selector(".msg.assistant[data-outcome=ok] >> text=got the gist")
    notice = page.locator(".msg.assistant .context-notice.from-window")
    assert "1 of 1 messages sent" in notice.inner_text() and "shortened by" in notice.inner_text()
    page.reload()
    page.wait_for_selector(".msg.assistant >> text=got the gist")
    assert "1 of 1 messages sent" in page.locator(".msg.assistant .context-notice.from-window").inner_text()
    assert page.locator(".summary-divider").count() == 0
