"""The settings screen's Providers section in Chromium against the real server: an admin adds a provider
pointing at a local model server, tests it, chats with it (streamed), sees only the key's last four after
a reload and removes it; the configuration's providers are read-only; a non-admin never sees the section."""

from __future__ import annotations

import pytest
import requests
from browser_helpers import shot
from fakeproviders import FakeProvider, Reply, openai_text, refused_url

KEY = "sk-browser-Secret-Key-24680-13579-wxyz"
PASSWORD = "admin-pass-1"


@pytest.fixture
def lab_model():
    """An OpenAI-compatible model server streaming a reply word by word."""
    fake = FakeProvider(default=Reply(chunks=openai_text("Streamed ", "from ", "the ", "lab."), delay=0.05))
    fake.get_json["/v1/models"] = {"data": [{"id": "m1"}]}
    yield fake
    fake.close()


def _login(page, url, username, password):
    page.goto(url + "/login")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_selector("body[data-ready=true]")


def _open_settings(page):
    page.click("#open-settings")
    page.wait_for_selector("#settings-preferences")


def test_admin_adds_tests_chats_with_and_removes_a_provider(server_factory, page_factory, lab_model):
    server = server_factory({"ODYSSEUS_AUTH": "password", "OLLAMA_HOST": refused_url()})
    admin = requests.Session()
    admin.headers["Origin"] = server.url
    assert (
        admin.post(
            server.url + "/api/auth/setup", json={"username": "admin", "password": PASSWORD}, timeout=10
        ).status_code
        == 201
    )
    assert (
        admin.post(
            server.url + "/api/auth/users", json={"username": "bob", "password": "bob-pass-123"}, timeout=10
        ).status_code
        == 201
    )
    page = page_factory()
    page.on("dialog", lambda dialog: dialog.accept())
    _login(page, server.url, "admin", PASSWORD)
    _open_settings(page)
    section = "#settings-providers"
    page.wait_for_selector(f"{section} .provider-row[data-name=ollama]")
    assert "read-only" in page.inner_text(f"{section} .provider-row[data-name=ollama] .provider-label")
    assert page.locator(f"{section} .provider-row[data-name=ollama] .edit-provider").count() == 0

    page.select_option(f"{section} select[name=provider_kind]", "openai")
    page.fill(f"{section} input[name=provider_name]", "lab")
    page.fill(f"{section} input[name=provider_base_url]", lab_model.url + "/v1")
    page.fill(f"{section} input[name=provider_api_key]", KEY)
    assert page.get_attribute(f"{section} input[name=provider_api_key]", "type") == "password"
    assert not page.is_visible(f"{section} input[name=provider_clear_key]")  # nothing stored to remove yet
    page.fill(f"{section} input[name=provider_default_model]", "m1")
    page.click(f"{section} .test-provider")  # the unsaved form first
    page.wait_for_selector(f"{section} .provider-result[data-kind=ok]")
    assert "m1 answered" in page.inner_text(f"{section} .provider-result")
    page.click(f"{section} .save-provider")
    row = f"{section} .provider-row[data-name=lab]"
    page.wait_for_selector(row)
    assert page.inner_text(f"{row} .provider-key") == "…wxyz"
    page.click(f"{row} .test-saved")
    page.wait_for_selector(f"{row} .test-result[data-kind=ok]")
    assert "OK: m1 answered" in page.inner_text(f"{row} .test-result")
    assert lab_model.posts[-1].body["max_tokens"] == 1
    shot(page, "30-settings-providers")

    # the chat's model picker has the new model at once; a reply streams from the local server
    page.keyboard.press("Escape")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#model-picker option')].some(o => o.value === 'lab/m1')"
    )
    page.select_option("#model-picker", "lab/m1")
    page.fill("#input", "hello lab")
    page.press("#input", "Enter")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]", timeout=30000)
    assert "Streamed from the lab." in page.locator(".msg.assistant").last.inner_text()
    chat_post = [p for p in lab_model.posts if p.body.get("max_tokens") != 1][-1]
    assert chat_post.body["model"] == "m1" and chat_post.headers["Authorization"] == f"Bearer {KEY}"

    # after a reload only the last four are shown, in the list and in the edit form
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    _open_settings(page)
    page.wait_for_selector(row)
    assert page.inner_text(f"{row} .provider-key") == "…wxyz"
    page.click(f"{row} .edit-provider")
    key_field = f"{section} input[name=provider_api_key]"
    assert page.input_value(key_field) == ""
    assert "…wxyz" in page.get_attribute(key_field, "placeholder")
    assert page.is_visible(f"{section} input[name=provider_clear_key]")
    assert KEY not in page.content() and KEY[:-4] not in page.content()
    page.fill(f"{section} input[name=provider_default_model]", "m2")
    page.click(f"{section} .save-provider")  # the key left empty: kept
    page.wait_for_selector(f"{section} .provider-result[data-kind=ok]")
    listing = admin.get(server.url + "/api/admin/providers", timeout=10).json()["providers"]
    lab = next(p for p in listing if p["name"] == "lab")
    assert lab["default_model"] == "m2" and lab["api_key_last4"] == "wxyz"

    page.click(f"{row} .remove-provider")
    page.wait_for_selector(row, state="detached")
    assert not any(
        p["name"] == "lab" for p in admin.get(server.url + "/api/admin/providers", timeout=10).json()["providers"]
    )
    page.keyboard.press("Escape")
    page.wait_for_function(
        "() => ![...document.querySelectorAll('#model-picker option')].some(o => o.value === 'lab/m1')"
    )

    # a non-admin has no Providers section
    other = page_factory()
    _login(other, server.url, "bob", "bob-pass-123")
    _open_settings(other)
    other.wait_for_selector("#settings-tokens")
    assert other.locator("#settings-providers").count() == 0
    assert other.locator("#settings-admin").count() == 0
