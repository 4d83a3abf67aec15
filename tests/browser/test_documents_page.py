"""The document panel in Chromium against the real server and a scripted OpenAI-compatible model.

Live preview of a created document, history after a reload equal to live, accept and reject of
an AI edit of the open document (chat mode with the document tools), suggestion cards (accept,
reject, accept all), a user edit saved with PUT, and restoring a version.
"""

from __future__ import annotations

import json

import pytest
import requests
from browser_helpers import open_app, shot
from liveserver import LiveServer
from scripted_model import ScriptedModel, reply

CODE = "".join(f"def step_{i}():\n    return {i}  # caf\u00e9\n" for i in range(12))

SNAPSHOT = """() => ({
  chips: [...document.querySelectorAll('.doc-chip')].map(c => [c.dataset.docId, c.innerText]),
  panel: !document.querySelector('#doc-panel').hidden,
  title: document.querySelector('.doc-title')?.innerText,
  meta: document.querySelector('.doc-meta')?.innerText,
  text: document.querySelector('.doc-editor')?.textContent,
  lines: document.querySelector('.doc-lines')?.textContent.split('\\n').length,
  state: document.querySelector('#doc-panel').dataset.state,
})"""


@pytest.fixture(scope="module")
def model():
    with ScriptedModel() as scripted:
        yield scripted


@pytest.fixture(scope="module")
def docs_server(model, tmp_path_factory):
    server = LiveServer(
        str(tmp_path_factory.mktemp("docpage")),
        {
            "ODYSSEUS_AUTH": "none",
            "OPENAI_BASE_URL": model.url + "/v1",
            "OPENAI_API_KEY": "sk-x",
            "ODYSSEUS_AGENT_TOOLS": "update_plan",
            "ODYSSEUS_HEARTBEAT_INTERVAL": "0.5",
            "ODYSSEUS_EVICT_GRACE": "30",
        },
    ).start()
    yield server
    server.stop()


def script(model, *replies):
    with model.lock:
        model.replies = list(replies)
        model.requests.clear()


def slow_call(call_id, name, delay=0.0, **arguments):
    text = json.dumps(arguments)
    return {
        "id": call_id,
        "name": name,
        "arguments": arguments,
        "fragment_delay": delay,
        "fragments": [text[i : i + 9] for i in range(0, len(text), 9)],
    }


def send(page, text):
    page.fill("#input", text)
    page.press("#input", "Enter")


def replies_done(page, count):
    page.wait_for_function(
        "n => document.querySelectorAll('.msg.assistant[data-outcome]').length >= n && !document.querySelector("
        "'.msg.assistant.streaming')",
        arg=count,
        timeout=30000,
    )


def session_with_document(server, content):
    """A session (one plain turn) with an active document made over REST."""
    sid = requests.post(server.url + "/api/sessions", json={"title": "doc chat"}, timeout=10).json()["id"]
    doc = requests.post(
        server.url + "/api/document",
        timeout=10,
        json={"session_id": sid, "title": "Poem", "language": "markdown", "content": content},
    )
    assert doc.status_code == 201
    return sid, doc.json()


def server_doc(server, doc_id):
    return requests.get(f"{server.url}/api/document/{doc_id}", timeout=10).json()


def test_live_preview_then_the_same_state_after_a_reload(docs_server, model, page):
    script(
        model,
        reply(
            "Writing it.", [slow_call("c1", "create_document", 0.04, title="Steps", language="python", content=CODE)]
        ),
        reply("Here it is."),
    )
    open_app(page, docs_server.url)
    page.click(".mode-switch label:has(input[value=agent])")
    send(page, "write the steps")
    page.wait_for_selector("#doc-panel:not([hidden])[data-state=preview]")
    partial = page.wait_for_function(
        "() => { const t = document.querySelector('.doc-editor').textContent; return t.length > 20 && t; }"
    ).json_value()
    assert CODE.startswith(partial) and partial != CODE  # a live, growing preview
    assert page.inner_text(".doc-title") == "Steps"
    shot(page, "20-document-live-preview")
    replies_done(page, 1)
    page.wait_for_selector("#doc-panel[data-state=editing]")
    live = page.evaluate(SNAPSHOT)
    assert live["text"] == CODE and live["lines"] == CODE.count("\n") + 1 and live["meta"] == "python · v1"
    assert [c[1] for c in live["chips"]] == ["Created “Steps” (v1)\nOpen"]
    assert page.locator(".doc-editor .hljs-keyword").count() > 0  # highlighted
    shot(page, "21-document-created")
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    page.wait_for_selector("#doc-panel:not([hidden])")
    assert page.evaluate(SNAPSHOT) == live


def test_ai_edit_of_the_open_document_is_reviewed_then_rejected_or_accepted(docs_server, model, page):
    sid, doc = session_with_document(docs_server, "Roses are red,\nviolets are blue.\n")
    open_app(page, docs_server.url, sid)
    page.wait_for_selector("#doc-panel:not([hidden])")
    assert page.text_content(".doc-editor") == doc["content"]
    edit = {"edits": [{"find": "blue", "replace": "green"}]}
    script(model, reply("", [slow_call("c1", "edit_document", **edit)]), reply("Made it green."))
    with page.expect_request("**/api/chat_stream") as sent:
        send(page, "make it green")
    assert sent.value.post_data_json["active_doc_id"] == doc["id"] and sent.value.post_data_json["mode"] == "chat"
    page.wait_for_selector("#doc-panel[data-state=review] .doc-diff ins")
    assert page.inner_text(".doc-diff ins").strip() == "violets are green."
    assert page.text_content(".doc-editor") == doc["content"]  # not replaced before the user decides
    assert [t["function"]["name"] for t in model.requests[0]["tools"]] == [
        "create_document",
        "update_document",
        "edit_document",
        "suggest_document",
    ]
    shot(page, "22-document-ai-edit-review")
    page.click(".doc-reject")
    page.wait_for_function("() => document.querySelector('.doc-status').innerText.includes('rejected')")
    kept = server_doc(docs_server, doc["id"])
    assert kept["content"] == doc["content"] and kept["version"] == 3  # v2 the assistant's, v3 the rejection

    script(
        model,
        reply("", [slow_call("c2", "update_document", 0.02, content="Roses are red,\nskies are grey.\n")]),
        reply("Rewritten."),
    )
    send(page, "rewrite the second line")
    page.wait_for_selector(".doc-review .doc-preview")  # a rewrite of the open document previews aside
    page.wait_for_selector("#doc-panel[data-state=review] .doc-accept")
    assert page.text_content(".doc-editor") == doc["content"]
    page.click(".doc-accept")
    page.wait_for_selector("#doc-panel[data-state=editing]")
    assert page.text_content(".doc-editor") == "Roses are red,\nskies are grey.\n"
    assert page.inner_text(".doc-meta") == "markdown · v4"
    assert server_doc(docs_server, doc["id"])["version"] == 4


def test_suggestion_cards_one_at_a_time(docs_server, model, page):
    sid, doc = session_with_document(docs_server, "one two three four\n")
    open_app(page, docs_server.url, sid)
    page.wait_for_selector("#doc-panel:not([hidden])")
    suggestions = [
        {"find": "one", "replace": "ONE", "reason": "shout"},
        {"find": "two", "replace": "2", "reason": "digits"},
        {"find": "three", "replace": "3", "reason": "digits"},
        {"find": "four", "replace": "4", "reason": "digits"},
    ]
    script(model, reply("", [slow_call("c1", "suggest_document", suggestions=suggestions)]), reply("See the cards."))
    send(page, "suggest changes")
    card = page.wait_for_selector(".suggestion-card[data-suggestion-id=sugg-1]")
    assert page.locator(".suggestion-card").count() == 1 and "shout" in card.inner_text()
    shot(page, "23-document-suggestion-card")
    page.click(".suggestion-accept")
    page.wait_for_selector(".suggestion-card[data-suggestion-id=sugg-2]")
    page.wait_for_function("() => document.querySelector('.doc-status').innerText.startsWith('Saved')")
    accepted = server_doc(docs_server, doc["id"])
    assert accepted["content"] == "ONE two three four\n" and accepted["version"] == 1  # folded into the user's v1
    page.evaluate("() => { document.querySelector('.doc-status').textContent = ''; }")
    page.click(".suggestion-reject")
    page.wait_for_selector(".suggestion-card[data-suggestion-id=sugg-3]")
    page.click(".suggestion-accept-all")
    page.wait_for_selector(".doc-suggestion", state="hidden")
    page.wait_for_function("() => document.querySelector('.doc-status').innerText.startsWith('Saved')")
    assert page.text_content(".doc-editor") == "ONE two 3 4\n"
    assert server_doc(docs_server, doc["id"])["content"] == "ONE two 3 4\n"
    chip = page.locator(".doc-chip.suggest")
    assert chip.inner_text().startswith("Suggested 4 changes")


def test_user_edit_save_and_restore_a_version(docs_server, model, page):
    sid, doc = session_with_document(docs_server, "first draft")
    open_app(page, docs_server.url, sid)
    page.wait_for_selector("#doc-panel:not([hidden])")
    assert page.is_disabled(".doc-save")
    page.click(".doc-editor")
    page.keyboard.press("End")
    page.keyboard.type(", revised")
    page.click(".doc-save")
    page.wait_for_function("() => document.querySelector('.doc-status').innerText.startsWith('Saved')")
    saved = server_doc(docs_server, doc["id"])
    assert saved["content"] == "first draft, revised" and saved["version"] == 1  # folded into the user's v1
    page.click(".doc-versions-toggle")
    page.wait_for_selector(".version[data-version='1']")
    script(model, reply("", [slow_call("c1", "update_document", content="assistant draft")]), reply("Replaced."))
    send(page, "replace it")
    page.wait_for_selector("#doc-panel[data-state=review] .doc-accept")
    page.click(".doc-accept")
    page.wait_for_selector(".version[data-version='2']")  # the open list follows
    page.click(".version[data-version='1'] .version-restore")
    page.wait_for_selector(".version[data-version='3']")
    assert page.text_content(".doc-editor") == "first draft, revised"
    restored = server_doc(docs_server, doc["id"])
    assert restored["content"] == "first draft, revised" and restored["version"] == 3
    assert "Restored from v1" in page.inner_text(".version[data-version='3']")
    shot(page, "24-document-versions")
