"""Uploads in the page: the attach button, drag and drop and paste, progress bars, chips, image previews,
sources from the user's files under a reply, and the same after a reload."""

from __future__ import annotations

import base64
import os
import sys
import time

import requests
from browser_helpers import open_app, shot

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import sample_files as sf  # noqa: E402

VOLCANO = ("Volcanoes erupt when magma rises. The volcano Etna in Sicily erupts often. " * 3).encode()

WATCH_PROGRESS = """() => {
  window.progressSeen = [];
  new MutationObserver((records) => {
    for (const r of records) {
      const nodes = r.type === 'attributes' ? [r.target] : [...r.addedNodes];
      for (const n of nodes) {
        const bars = n.matches?.('progress') ? [n] : [...(n.querySelectorAll?.('progress') || [])];
        for (const b of bars) window.progressSeen.push(Number(b.value));
      }
    }
  }).observe(document.getElementById('attach-tray'), {subtree: true, childList: true, attributes: true,
                                                      attributeFilter: ['value']});
}"""

DROP = """([name, text]) => {
  const dt = new DataTransfer();
  dt.items.add(new File([text], name, {type: 'text/plain'}));
  const app = document.getElementById('app');
  app.dispatchEvent(new DragEvent('dragover', {dataTransfer: dt, bubbles: true, cancelable: true}));
  app.dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true}));
}"""

PASTE = """([name, b64]) => {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const dt = new DataTransfer();
  dt.items.add(new File([bytes], name, {type: 'image/png'}));
  document.getElementById('input').dispatchEvent(new ClipboardEvent('paste', {clipboardData: dt, bubbles: true,
                                                                               cancelable: true}));
}"""


def context_snapshot(page):
    """What the conversation shows about attachments and sources, per message."""
    return page.evaluate("""() => [...document.querySelectorAll('.msg')].map((m) => ({
      role: m.classList.contains('user') ? 'user' : 'assistant',
      chips: [...m.querySelectorAll('.attach-list .attach-chip')].map((c) => [c.dataset.uploadId,
              c.querySelector('.attach-name').textContent, c.querySelector('.attach-size').textContent,
              !!c.querySelector('img.attach-thumb')]),
      sources: [...m.querySelectorAll('.rag-source')].map((s) => [s.dataset.uploadId,
                s.querySelector('.rag-file').textContent, s.querySelector('.rag-snippet').textContent]),
      notices: [...m.querySelectorAll('.context-notice')].map((n) => n.textContent),
    }))""")


def wait_indexed(server, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        files = requests.get(server.url + "/api/upload", timeout=5).json()["files"]
        if files and all(f["index_status"] in ("indexed", "none") for f in files):
            return files
        time.sleep(0.1)
    raise AssertionError(f"not indexed in time: {files}")


def test_attach_by_button_drop_and_paste_then_sources_and_reload(server, page):
    open_app(page, server.url)
    page.evaluate(WATCH_PROGRESS)
    big = b"Plain filler line about nothing in particular.\n" * 40000  # ~1.9 MB: upload progress events
    page.set_input_files("#attach-input", files=[{"name": "filler.txt", "mimeType": "text/plain", "buffer": big}])
    page.evaluate(DROP, ["volcano.txt", VOLCANO.decode()])
    page.evaluate(PASTE, ["pasted.png", base64.b64encode(sf.png(6, 4)).decode()])
    page.wait_for_selector("#attach-tray:not([hidden])")
    page.wait_for_function(
        "() => document.querySelectorAll('#attach-tray .attach-chip.ready').length === 3", timeout=30000
    )
    assert page.evaluate("window.progressSeen.length") > 0 and page.evaluate("Math.max(...window.progressSeen)") > 0
    assert page.locator("#attach-tray .attach-chip progress").count() == 0  # bars go when the upload is done
    assert page.locator("#attach-tray img.attach-thumb").count() == 1  # the pasted image is previewed
    shot(page, "uploads-tray")

    page.fill("#input", "What is in these files?")
    page.press("#input", "Enter")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]", timeout=30000)
    assert page.locator("#attach-tray .attach-chip").count() == 0 and page.is_hidden("#attach-tray")
    uploads = {f["name"]: f for f in requests.get(server.url + "/api/upload", timeout=5).json()["files"]}
    chips = context_snapshot(page)[0]["chips"]
    assert [c[1] for c in chips] == ["filler.txt", "volcano.txt", "pasted.png"]
    assert [c[0] for c in chips] == [uploads[n]["id"] for n in ("filler.txt", "volcano.txt", "pasted.png")]
    assert chips[2][2].endswith("6×4") and chips[2][3] is True  # the server's record: size and preview
    notices = context_snapshot(page)[1]["notices"]
    assert any("does not accept images" in n and "pasted.png" in n for n in notices)  # the demo model has no vision

    wait_indexed(server)
    page.fill("#input", "Which volcano erupts often?")
    page.press("#input", "Enter")
    page.wait_for_function(
        "() => document.querySelectorAll('.msg.assistant[data-outcome=ok]').length === 2", timeout=30000
    )
    live = context_snapshot(page)
    sources = live[3]["sources"]
    assert sources and sources[0][1] == "volcano.txt" and sources[0][0] == uploads["volcano.txt"]["id"]
    assert "Etna" in sources[0][2]
    shot(page, "uploads-sources")

    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    page.wait_for_selector(".msg.assistant .rag-source", state="attached")
    assert context_snapshot(page) == live


def test_a_refused_file_shows_its_reason_and_is_not_sent(server, page):
    open_app(page, server.url)
    page.set_input_files(
        "#attach-input",
        files=[
            {"name": "tool", "mimeType": "application/octet-stream", "buffer": sf.ELF},
            {"name": "ok.txt", "mimeType": "text/plain", "buffer": b"fine text"},
        ],
    )
    page.wait_for_selector("#attach-tray .attach-chip.failed .attach-error")
    assert "executables are not accepted" in page.inner_text("#attach-tray .attach-chip.failed")
    page.wait_for_selector("#attach-tray .attach-chip.ready")
    page.fill("#input", "hello")
    page.press("#input", "Enter")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]", timeout=30000)
    assert [c[1] for c in context_snapshot(page)[0]["chips"]] == ["ok.txt"]
    assert [f["name"] for f in requests.get(server.url + "/api/upload", timeout=5).json()["files"]] == ["ok.txt"]


def test_a_file_whose_text_is_not_extracted_says_so_on_its_chip(server, page):
    """A damaged PDF is kept but unread (issue 38 item 1): its composer chip says so."""
    open_app(page, server.url)
    page.set_input_files(
        "#attach-input",
        files=[{"name": "broken.pdf", "mimeType": "application/pdf", "buffer": b"%PDF-1.4\nnot really a pdf"}],
    )
    chip = page.locator("#attach-tray .attach-chip.ready.text-not-extracted")
    chip.wait_for(timeout=30000)
    assert chip.locator(".attach-note").inner_text() == "text not extracted"
    assert "PDF could not be read" in chip.get_attribute("title")
