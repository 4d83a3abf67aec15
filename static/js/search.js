// Sidebar search across the user's chats (GET /api/search; archived ones too, marked so). Results
// replace the session list while the box has text; snippets are built from text nodes with <mark>
// around the server's highlight offsets (escape, then highlight: no HTML from a message ever reaches
// innerHTML).

import { api } from "./api.js";
import { el } from "./dom.js";

/** A snippet as DOM: plain text with <mark> around each [start, end) span. */
export function highlighted(text, spans) {
  const box = el("span", "result-snippet");
  let at = 0;
  for (const [start, end] of (spans || []).slice().sort((a, b) => a[0] - b[0])) {
    if (start < at || end > text.length || end <= start) continue;
    box.append(document.createTextNode(text.slice(at, start)), el("mark", null, text.slice(start, end)));
    at = end;
  }
  box.append(document.createTextNode(text.slice(at)));
  return box;
}

/** Options: {input, list, sessions (the session list to hide), onOpen(sessionId, messageId), toast}. */
export class Search {
  constructor(options) {
    this.options = options;
    this.timer = null;
    this.asked = 0;
    options.input.addEventListener("input", () => this.schedule());
    options.input.addEventListener("keydown", (e) => { if (e.key === "Escape") this.clear(); });
  }

  schedule() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.run(), 250);
  }

  clear() {
    this.options.input.value = "";
    this.show(false);
  }

  show(searching) {
    this.options.list.hidden = !searching;
    this.options.sessions.hidden = searching;
  }

  async run() {
    const query = this.options.input.value.trim();
    const asked = ++this.asked;
    if (!query) return this.show(false);
    let data;
    try {
      data = await api("GET", `/api/search?q=${encodeURIComponent(query)}`);
    } catch (err) {
      if (asked !== this.asked) return;
      this.render([], err.message);
      return;
    }
    if (asked === this.asked) this.render(data.results);
  }

  render(results, error) {
    const list = this.options.list;
    list.textContent = "";
    this.show(true);
    if (error || !results.length) {
      list.appendChild(el("li", "search-empty", error ? `Search failed: ${error}` : "No messages match."));
      return;
    }
    for (const result of results) {
      const li = el("li", "search-result");
      li.dataset.sessionId = result.session_id;
      li.dataset.messageId = String(result.message_id);
      const open = el("button");
      open.type = "button";
      open.append(el("span", "result-title", result.title));
      if (result.archived) open.appendChild(el("span", "result-archived", "Archived")); // found though not listed
      open.appendChild(highlighted(result.snippet, result.highlights));
      open.addEventListener("click", () => this.options.onOpen(result.session_id, result.message_id));
      li.appendChild(open);
      list.appendChild(li);
    }
  }
}
