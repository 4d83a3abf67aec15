"""Issue 36 in the page: the composer's `/` prompt menu (keyboard only), prompts and agents made in
Settings, and thumbs up or down on a reply that are still there after a reload."""

from __future__ import annotations

import requests
from browser_helpers import open_app, shot

MENU = "#prompt-menu"
OPTIONS = "#prompt-menu [role=option]"


def post(server, path: str, body: dict) -> dict:
    answer = requests.post(server.url + path, json=body, headers={"Origin": server.url}, timeout=10)
    assert answer.status_code == 201, answer.text
    return answer.json()


def menu_state(page) -> dict:
    """What the menu shows and which option the message box points at."""
    return page.evaluate(
        """() => {
          const input = document.getElementById('input');
          const active = input.getAttribute('aria-activedescendant');
          return {
            hidden: document.getElementById('prompt-menu').hidden,
            expanded: input.getAttribute('aria-expanded'),
            commands: [...document.querySelectorAll('#prompt-menu [role=option]')].map(o => o.dataset.command),
            active: active ? document.getElementById(active).dataset.command : null,
            selected: [...document.querySelectorAll('#prompt-menu [aria-selected=true]')].map(o => o.dataset.command),
            value: input.value,
            focused: document.activeElement.id || document.activeElement.name || document.activeElement.tagName,
          };
        }"""
    )


def test_the_slash_menu_lists_filters_and_inserts_prompts_with_the_keyboard_only(server, page):
    post(server, "/api/prompts", {"title": "Fix the grammar", "command": "fix", "content": "Fix the grammar of this:"})
    post(
        server,
        "/api/prompts",
        {"title": "Summarize", "command": "summarize", "content": "Summarize {{text}} for {{ audience }}."},
    )
    post(server, "/api/prompts", {"title": '<img src=x onerror="window.pwned=1">', "command": "zz", "content": "Z"})
    open_app(page, server.url)
    # Keyboard only from here: the skip link leads to the message box.
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    assert menu_state(page)["focused"] == "input"
    page.keyboard.type("/")
    page.wait_for_selector(f"{MENU}:not([hidden])")
    state = menu_state(page)
    assert state["commands"] == ["fix", "summarize", "zz"] and state["expanded"] == "true"
    assert state["active"] == state["selected"][0] == "fix"
    assert page.get_attribute("#prompt-menu", "role") == "listbox"
    # the markup in a title is text: no image in the menu, the title shown as written
    assert page.locator(f"{MENU} img").count() == 0
    assert (
        page.locator(f"{OPTIONS}[data-command=zz] .prompt-title").inner_text() == '<img src=x onerror="window.pwned=1">'
    )
    shot(page, "36-prompt-menu")
    page.keyboard.press("ArrowDown")
    assert menu_state(page)["active"] == "summarize"
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")  # past the last: back to the first
    assert menu_state(page)["active"] == "fix"
    page.keyboard.press("ArrowUp")  # before the first: the last
    assert menu_state(page)["selected"] == ["zz"]
    # Escape closes the menu and leaves the text; typing on filters again
    page.keyboard.press("Escape")
    state = menu_state(page)
    assert state["hidden"] and state["expanded"] == "false" and state["value"] == "/"
    page.keyboard.type("f")
    page.wait_for_selector(f"{MENU}:not([hidden])")
    assert menu_state(page)["commands"] == ["fix"]
    page.keyboard.type("x")
    assert menu_state(page)["commands"] == [] and page.locator(f"{MENU} .prompt-empty").is_visible()
    page.keyboard.press("Backspace")
    # Tab inserts the prompt in place of the typed command
    page.keyboard.press("Tab")
    state = menu_state(page)
    assert state["hidden"] and state["value"] == "Fix the grammar of this:" and state["focused"] == "input"
    assert page.locator(".msg.user").count() == 0  # inserting sent nothing
    # a prompt with variables asks for each first; Enter in the form inserts it filled in
    page.keyboard.press("Control+A")
    page.keyboard.press("Backspace")
    page.keyboard.type("/sum")
    assert menu_state(page)["commands"] == ["summarize"]
    page.keyboard.press("Enter")
    page.wait_for_selector(".prompt-variables")
    assert page.evaluate("document.activeElement.name") == "text"
    assert page.inner_text("#modal-title") == "Fill in /summarize"
    page.keyboard.type("the report")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.name") == "audience"
    page.keyboard.type("a child <b>")
    page.keyboard.press("Enter")
    page.wait_for_selector("#modal", state="hidden")
    state = menu_state(page)
    assert state["value"] == "Summarize the report for a child <b>." and state["focused"] == "input"
    assert state["hidden"]
    # now Enter sends what was inserted
    page.keyboard.press("Enter")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]")
    assert page.locator(".msg.user .msg-body").inner_text() == "Summarize the report for a child <b>."
    # Escape in the variables form cancels it: nothing inserted, the box keeps the command
    page.keyboard.type("/summarize")
    page.keyboard.press("Enter")
    page.wait_for_selector(".prompt-variables")
    page.keyboard.press("Escape")
    page.wait_for_selector("#modal", state="hidden")
    state = menu_state(page)
    assert state["value"] == "/summarize" and state["focused"] == "input" and state["hidden"]
    assert page.evaluate("window.pwned") is None


def test_prompts_made_in_settings_are_offered_in_the_composer(server, page):
    open_app(page, server.url)
    page.click("#open-settings")
    section = "#settings-prompts"
    page.wait_for_selector(f"{section} .prompt-list")
    page.fill(f"{section} input[name=prompt_title]", "Explain <i>simply</i>")
    page.fill(f"{section} input[name=prompt_command]", "eli5")
    page.fill(f"{section} textarea[name=prompt_content]", "Explain {{topic}} simply.")
    page.click(f"{section} .save-prompt")
    page.wait_for_selector(f"{section} .prompt-row[data-command=eli5]")
    assert page.inner_text(f"{section} .prompt-row .prompt-row-title") == "Explain <i>simply</i>"
    assert page.locator(f"{section} .prompt-list i").count() == 0
    # the same command again: the server's 409 is shown, nothing is added
    page.fill(f"{section} input[name=prompt_title]", "Again")
    page.fill(f"{section} input[name=prompt_command]", "eli5")
    page.fill(f"{section} textarea[name=prompt_content]", "Again")
    page.click(f"{section} .save-prompt")
    page.wait_for_selector(f"{section} .result[data-kind=error]")
    assert "/eli5" in page.inner_text(f"{section} .result")
    assert page.locator(f"{section} .prompt-row").count() == 1
    # edit: a new command
    page.click(f"{section} .prompt-row .edit-prompt")
    assert page.input_value(f"{section} input[name=prompt_command]") == "eli5"
    page.fill(f"{section} input[name=prompt_command]", "simple")
    page.click(f"{section} .save-prompt")
    page.wait_for_selector(f"{section} .prompt-row[data-command=simple]")
    prompts = requests.get(server.url + "/api/prompts", timeout=5).json()["prompts"]
    assert [(p["command"], p["content"]) for p in prompts] == [("simple", "Explain {{topic}} simply.")]
    page.click(".modal-close")
    page.focus("#input")
    page.keyboard.type("/sim")
    page.wait_for_selector(f"{OPTIONS}[data-command=simple]")
    # delete it in Settings: the menu has nothing to offer any more
    page.keyboard.press("Escape")
    page.click("#open-settings")
    page.wait_for_selector(f"{section} .prompt-row")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click(f"{section} .prompt-row .delete-prompt")
    page.wait_for_selector(f"{section} .prompt-row", state="detached")
    assert requests.get(server.url + "/api/prompts", timeout=5).json()["prompts"] == []


def rating_state(page) -> dict:
    return page.evaluate(
        """() => {
          const box = document.querySelector('.msg.assistant .msg-rating');
          return {
            up: box.querySelector('.rate-up').getAttribute('aria-pressed'),
            down: box.querySelector('.rate-down').getAttribute('aria-pressed'),
            comment: box.querySelector('.rating-comment').textContent,
            hidden: box.hidden,
          };
        }"""
    )


def test_a_rating_and_its_comment_survive_a_reload(server, page):
    open_app(page, server.url)
    page.fill("#input", "rate this reply")
    page.press("#input", "Enter")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]")
    session_id = page.url.split("session=")[1]
    assert rating_state(page) == {"up": "false", "down": "false", "comment": "", "hidden": False}
    page.click(".msg.assistant .rate-up")
    page.wait_for_selector(".msg.assistant .rate-up[aria-pressed=true]")
    page.click(".msg.assistant .rating-comment-edit")
    page.fill(".msg.assistant .rating-form textarea", "Short and <b>right</b>")
    page.click(".msg.assistant .rating-save")
    page.wait_for_selector(".msg.assistant .rating-form", state="detached")
    shot(page, "36-rated-reply")
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]")
    assert rating_state(page) == {"up": "true", "down": "false", "comment": "“Short and <b>right</b>”", "hidden": False}
    assert page.locator(".msg.assistant .msg-rating b").count() == 0
    [rated] = requests.get(server.url + "/api/ratings", timeout=5).json()["ratings"]
    assert (rated["session_id"], rated["value"], rated["comment"]) == (session_id, 1, "Short and <b>right</b>")
    # Settings lists it (and, for the single-user owner who is the admin, counts it per model)
    page.click("#open-settings")
    row = f"#settings-ratings .rating-row[data-message-id='{rated['message_id']}']"
    page.wait_for_selector(row)
    assert page.inner_text(f"{row} .rating-value") == "good"
    assert page.inner_text(f"{row} .rating-row-comment") == "Short and <b>right</b>"
    page.wait_for_selector(f"#settings-admin-ratings .model-rating[data-model='{rated['model']}']")
    counts = page.locator("#settings-admin-ratings .model-rating td").all_inner_texts()
    assert counts == [rated["model"], "1", "0", "1"]
    page.click(".modal-close")
    # thumbs down keeps the comment; pressing it again removes the rating, also after a reload
    page.click(".msg.assistant .rate-down")
    page.wait_for_selector(".msg.assistant .rate-down[aria-pressed=true]")
    assert rating_state(page)["up"] == "false"
    assert requests.get(server.url + "/api/ratings", timeout=5).json()["ratings"][0]["comment"] == (
        "Short and <b>right</b>"
    )
    page.click(".msg.assistant .rate-down")
    page.wait_for_selector(".msg.assistant .rate-down[aria-pressed=false]")
    page.reload()
    page.wait_for_selector(".msg.assistant[data-outcome=ok]")
    assert rating_state(page) == {"up": "false", "down": "false", "comment": "", "hidden": False}
    assert requests.get(server.url + "/api/ratings", timeout=5).json()["ratings"] == []
    assert page.locator(".msg.user .msg-rating:not([hidden])").count() == 0  # your own messages are not rated


def test_an_agent_made_in_settings_from_the_workflows_screen(server, page):
    open_app(page, server.url)
    page.click("#chat-menu")
    page.click(".popup-menu .menu-workflows")
    page.wait_for_selector(".workflow-needs-agents")
    assert "POST /api/agents" not in page.inner_text(".workflow-screen")
    page.click(".workflow-needs-agents .open-agents")
    section = "#settings-agents"
    page.wait_for_selector(f"{section} .agent-list")
    page.wait_for_selector(f"{section} .tool-choices input[value=web_search]")
    assert page.evaluate("document.activeElement.closest('section')?.id") == "settings-agents"
    page.fill(f"{section} input[name=agent_name]", "  Research <b>helper</b> ")
    page.fill(f"{section} input[name=agent_id]", "keen_curie")
    page.fill(f"{section} textarea[name=agent_system_prompt]", "Cite your sources.")
    models = requests.get(server.url + "/api/models", timeout=5).json()["models"]
    page.select_option(f"{section} select[name=agent_model]", models[0]["id"])
    page.check(f"{section} .tool-choices input[value=web_search]")
    page.click(f"{section} .save-agent")
    page.wait_for_selector(f"{section} .agent-row[data-agent-id=keen_curie]")
    assert page.inner_text(f"{section} .agent-row .agent-row-name") == "Research <b>helper</b>"
    assert page.locator(f"{section} .agent-list b").count() == 0
    [agent] = requests.get(server.url + "/api/agents", timeout=5).json()["agents"]
    assert (agent["agent_id"], agent["name"], agent["system_prompt"], agent["model"], agent["tools"]) == (
        "keen_curie",
        "Research <b>helper</b>",
        "Cite your sources.",
        models[0]["id"],
        ["web_search"],
    )
    # edit: every tool again, another name
    page.click(f"{section} .agent-row .edit-agent")
    assert page.is_checked(f"{section} .tool-choices input[value=web_search]")
    page.fill(f"{section} input[name=agent_name]", "Researcher")
    page.uncheck(f"{section} .tool-choices input[value=web_search]")
    page.click(f"{section} .save-agent")
    page.wait_for_selector(f"{section} .agent-row .agent-row-name:text('Researcher')")
    agent = requests.get(server.url + "/api/agents/keen_curie", timeout=5).json()
    assert (agent["name"], agent["tools"], agent["system_prompt"]) == ("Researcher", None, "Cite your sources.")
    # a bad id is refused with the server's reason and stores nothing
    page.fill(f"{section} input[name=agent_name]", "Second")
    page.fill(f"{section} input[name=agent_id]", "Not An Id")
    page.click(f"{section} .save-agent")
    page.wait_for_selector(f"{section} .result[data-kind=error]")
    assert "agent_id" in page.inner_text(f"{section} .result")
    assert len(requests.get(server.url + "/api/agents", timeout=5).json()["agents"]) == 1
    shot(page, "36-settings-agents")
    # delete
    page.once("dialog", lambda dialog: dialog.accept())
    page.click(f"{section} .agent-row .delete-agent")
    page.wait_for_selector(f"{section} .agent-row", state="detached")
    assert requests.get(server.url + "/api/agents", timeout=5).json()["agents"] == []


def test_a_reopened_menu_answers_at_once_while_its_refresh_is_in_flight(server, page):
    """Typing `/fix` Enter fast inserts the prompt; it never sends `/fix` while the list reloads."""
    post(server, "/api/prompts", {"title": "Fix the grammar", "command": "fix", "content": "Fix the grammar of this:"})
    open_app(page, server.url)
    page.focus("#input")
    page.keyboard.type("/")
    page.wait_for_selector(f"{OPTIONS}[data-command=fix]")
    page.keyboard.press("Backspace")  # the menu closes; the next `/` opens it again and refreshes it
    assert menu_state(page)["hidden"]
    post(server, "/api/prompts", {"title": "Fixed later", "command": "fixlater", "content": "Later"})
    held = []
    page.route("**/api/prompts", lambda route: held.append(route))
    page.keyboard.type("/fix")
    page.keyboard.press("Enter")
    state = menu_state(page)
    assert state["value"] == "Fix the grammar of this:" and state["hidden"]
    assert page.locator(".msg.user").count() == 0
    assert held, "reopening the menu did not refresh the list"
    # the refresh still lands: the next opening lists the prompt made meanwhile
    for route in held:
        route.continue_()
    page.unroute("**/api/prompts")
    page.keyboard.press("Control+A")
    page.keyboard.press("Backspace")
    page.keyboard.type("/fix")
    page.wait_for_function(
        "[...document.querySelectorAll('#prompt-menu [role=option]')].map(o => o.dataset.command).join()"
        " == 'fix,fixlater'"
    )
