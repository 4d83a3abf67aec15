"""Exhibit cases a scripted model does not reach (an amended id, an unknown element type, an unsafe
URL), injected as scripted SSE. Every element type against the real server, and the phone layout:
test_agent_real.py."""

from __future__ import annotations

import requests
from browser_helpers import fulfil_sse, open_app, shot, sse

MERMAID = {
    "type": "exhibit",
    "schema_version": 1,
    "id": "ex1",
    "title": "Architecture",
    "layout": "stack",
    "elements": [{"type": "mermaid", "content": "graph TD; A[Browser]-->B[Server]"}],
}
TABLE = {
    "type": "exhibit",
    "schema_version": 1,
    "id": "ex2",
    "layout": "stack",
    "elements": [
        {
            "type": "table",
            "columns": ["Model", "Cost"],
            "caption": "Prices",
            "rows": [["opus", "0.40"], ["haiku", "0.02"], ["sonnet", "0.10"]],
        }
    ],
}
CITATION = {
    "type": "exhibit",
    "schema_version": 1,
    "id": "ex3",
    "layout": "stack",
    "elements": [
        {
            "type": "citation",
            "sources": [
                {
                    "label": "NLLB paper",
                    "url": "https://example.org/nllb",
                    "quote": "No language left behind.",
                    "kind": "active",
                    "source_type": "web",
                },
                {"label": "Archive one", "url": "https://example.org/a"},
                {"label": "Archive two", "url": "javascript:alert(1)", "kind": "passive"},
            ],
        }
    ],
}
CHOICE = {
    "type": "exhibit",
    "schema_version": 1,
    "id": "ex4",
    "layout": "stack",
    "elements": [{"type": "choice", "prompt": "Which DB?", "options": ["PostgreSQL", "Neo4j"]}],
}
UNKNOWN = {
    "type": "exhibit",
    "schema_version": 1,
    "id": "ex5",
    "layout": "stack",
    "elements": [{"type": "hologram", "frames": 3}],
}
AMENDED = {**MERMAID, "title": "Architecture v2", "elements": [{"type": "mermaid", "content": "graph LR; A-->B-->C"}]}
AMENDED_LATER = {**MERMAID, "title": "Architecture v3"}
EXHIBITS = sse(
    {"delta": "Here is what I found."},
    MERMAID,
    TABLE,
    CITATION,
    CHOICE,
    UNKNOWN,
    AMENDED,
    {"type": "chat_terminal", "data": {"status": "done"}},
)


def scripted(page, server):
    sid = requests.post(server.url + "/api/sessions", json={"title": "Exhibits"}, timeout=5).json()["id"]
    bodies = []

    def handle(route):
        body = route.request.post_data_json
        bodies.append(body)
        answer = (
            EXHIBITS
            if len(bodies) == 1
            else sse(
                {"delta": f"You chose {body['message']}."},
                AMENDED_LATER,
                {"type": "chat_terminal", "data": {"status": "done"}},
            )
        )
        fulfil_sse(route, answer, sid)

    page.route("**/api/chat_stream", handle)
    open_app(page, server.url, sid)
    page.fill("#input", "show me")
    page.press("#input", "Enter")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]")
    return bodies


def first_column(page, column: int = 1):
    return page.locator(".table-scroll tbody tr").evaluate_all(f"rows => rows.map(r => r.cells[{column}].textContent)")


def test_each_exhibit_type(server, page):
    bodies = scripted(page, server)
    # Mermaid, amended in place by the second event with the same id.
    page.wait_for_selector("[data-exhibit-id=ex1] .mermaid-canvas[data-rendered=true] svg", timeout=20000)
    assert page.locator("[data-exhibit-id=ex1]").count() == 1
    assert page.locator("[data-exhibit-id=ex1] .exhibit-title").inner_text() == "Architecture v2"
    assert "graph LR" in page.locator("[data-exhibit-id=ex1] .mermaid-source code").text_content()
    order = page.locator(".exhibit").evaluate_all("cards => cards.map(c => c.dataset.exhibitId)")
    assert order == ["ex1", "ex2", "ex3", "ex4", "ex5"]
    # Table: sortable by clicking a header, expandable to a modal.
    assert first_column(page) == ["0.40", "0.02", "0.10"]
    page.click(".table-scroll th button:text('Cost')")
    assert first_column(page) == ["0.02", "0.10", "0.40"]
    assert page.get_attribute(".table-scroll th:nth-child(2)", "aria-sort") == "ascending"
    page.click(".table-scroll th button:text('Cost')")
    assert first_column(page) == ["0.40", "0.10", "0.02"]
    # Citation: the active source folded out with its quote, passive ones listed; unsafe URLs not linked.
    citation = page.locator("[data-exhibit-id=ex3]")
    assert citation.locator("h4").inner_text() == "Sources"
    assert citation.locator(".source.active blockquote").inner_text() == "No language left behind."
    assert citation.locator(".source.active a").get_attribute("href") == "https://example.org/nllb"
    assert citation.locator(".sources.passive li").count() == 2
    assert citation.locator("a[href^='javascript']").count() == 0
    # Unknown element types show their source.
    assert "hologram" in page.locator("[data-exhibit-id=ex5] .exhibit-source").text_content()
    shot(page, "07-exhibits")
    page.click("[data-exhibit-id=ex2] .expand-table")
    page.wait_for_selector("dialog#modal[open] table")
    assert page.locator("dialog#modal .modal-title").inner_text() == "Prices"
    shot(page, "08-table-modal")
    page.keyboard.press("Escape")
    page.wait_for_selector("dialog#modal:not([open])", state="attached")
    # Choice: the clicked option is sent as the next message.
    page.click("[data-exhibit-id=ex4] button:text('Neo4j')")
    page.wait_for_selector("text=You chose Neo4j.")
    assert bodies[-1]["message"] == "Neo4j"
    assert page.locator(".msg.user .msg-body").all_inner_texts()[-1] == "Neo4j"
    assert page.locator("[data-exhibit-id=ex4] button:disabled").count() == 2
    # A later reply re-emitting ex1 amends it in the earlier reply too (as the server amends history).
    titles = page.locator("[data-exhibit-id=ex1] .exhibit-title").all_inner_texts()
    assert titles == ["Architecture v3", "Architecture v3"]
