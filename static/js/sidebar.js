// The sidebar's list of the user's sessions: open, rename in place (Enter saves, Escape cancels),
// delete after a confirmation. It owns no page state: the page tells it which session is open.

import { api } from "./api.js";
import { button, el } from "./dom.js";

/** Options: {current() -> open session id, onOpen(id), onDeleted(id), onTitle(title), toast(text)}. */
export class Sidebar {
  constructor(list, options) {
    this.list = list;
    this.options = options;
    this.sessions = [];
    this.running = new Set(); // sessions with a run going (server list plus this tab's own turns)
    this.local = new Set();
    this.poll = null;
  }

  /** Reload the sessions and the runs going from the server and redraw. */
  async refresh() {
    let runs = null;
    try {
      [this.sessions, runs] = await Promise.all([
        api("GET", "/api/sessions").then((data) => data.sessions),
        api("GET", "/api/agent/chat/runs?limit=50").then((data) => data.runs).catch(() => null),
      ]);
    } catch (err) {
      this.options.toast(`Could not load sessions: ${err.message}`);
      return;
    }
    if (runs) this.running = new Set(runs.filter((r) => r.status === "running").map((r) => r.session_id));
    this.render();
    // A run started elsewhere (another tab, a background job) ends on its own: look again later.
    clearTimeout(this.poll);
    if (this.running.size) this.poll = setTimeout(() => this.refresh(), 3000);
  }

  /** This tab stopped following a session's run (switched away): the server's list decides now. */
  forget(sessionId) {
    this.local.delete(sessionId);
  }

  /** This tab started (true) or saw the end of (false) a run in `sessionId`. */
  setRunning(sessionId, going) {
    if (!sessionId) return;
    if (going) {
      this.local.add(sessionId);
      this.running.add(sessionId);
      this.render();
    } else {
      this.local.delete(sessionId);
      this.running.delete(sessionId);
      this.refresh();
    }
  }

  /** Redraw from the last list (marks the open session). */
  render() {
    const currentId = this.options.current();
    this.list.textContent = "";
    for (const session of this.sessions) {
      const li = el("li", "session");
      li.dataset.sessionId = session.id;
      const open = button(session.title, "open", () => this.options.onOpen(session.id));
      open.title = session.title;
      if (session.id === currentId) open.setAttribute("aria-current", "page");
      if (this.running.has(session.id) || this.local.has(session.id)) {
        li.classList.add("running");
        const dot = el("span", "run-dot");
        dot.title = "A reply is being written";
        dot.setAttribute("role", "img");
        dot.setAttribute("aria-label", "reply in progress");
        open.prepend(dot);
      }
      li.append(open,
                button("✎", "rename icon", () => this.rename(li, session), `Rename ${session.title}`),
                button("✕", "delete icon", () => this.remove(session), `Delete ${session.title}`));
      this.list.appendChild(li);
    }
    const current = this.sessions.find((s) => s.id === currentId);
    this.options.onTitle(current ? current.title : null);
  }

  rename(li, session) {
    const input = el("input", "rename-input");
    input.value = session.title;
    input.setAttribute("aria-label", "New session title");
    li.replaceChildren(input);
    input.focus();
    input.select();
    let done = false;
    const finish = async (save) => {
      if (done) return;
      done = true;
      const title = input.value.trim();
      if (save && title && title !== session.title) {
        try {
          await api("PATCH", `/api/sessions/${encodeURIComponent(session.id)}`, { title });
        } catch (err) {
          this.options.toast(`Could not rename: ${err.message}`);
        }
      }
      this.refresh();
    };
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") finish(true);
      if (e.key === "Escape") finish(false);
    });
    input.addEventListener("blur", () => finish(true));
  }

  async remove(session) {
    if (!confirm(`Delete "${session.title}"? This cannot be undone.`)) return;
    try {
      await api("DELETE", `/api/sessions/${encodeURIComponent(session.id)}`);
    } catch (err) {
      this.options.toast(`Could not delete: ${err.message}`);
      return;
    }
    this.options.onDeleted(session.id);
    this.refresh();
  }
}
