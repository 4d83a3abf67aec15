// The sidebar's list of the user's sessions: open, rename in place (Enter saves, Escape cancels),
// delete after a confirmation. It owns no page state: the page tells it which session is open.
// Sessions come a page at a time (most recently updated first); scrolling to the end of the list,
// or its "More sessions" button, loads the next page after the last one shown (`before=`).

import { api } from "./api.js";
import { button, el } from "./dom.js";

const PAGE = 100;
const MAX_PAGE = 500; // the server's largest page
const NEAR_END_PX = 200;
const ORIGIN_KEY = "odysseus.sessionOrigin";

/** Options: {current() -> open session id, onOpen(id), onDeleted(id), onTitle(title), toast(text)}. */
export class Sidebar {
  constructor(list, options) {
    this.list = list;
    this.options = options;
    this.sessions = [];
    this.running = new Set(); // sessions with a run going (server list plus this tab's own turns)
    this.local = new Set();
    this.poll = null;
    this.hasMore = false;
    this.nextBefore = null;
    this.loadingMore = null;
    this.generation = 0; // bumps on every reload: a page fetched for an older list is dropped
    this.origin = localStorage.getItem(ORIGIN_KEY) === "api" ? "api" : "page"; // GET /api/sessions?origin=
    const scroller = list.parentElement;
    scroller.addEventListener("scroll", () => {
      if (scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < NEAR_END_PX) this.loadMore();
    }, { passive: true });
  }

  /** Pages from the newest until `wanted` sessions and `untilId` (at most a page more, or all) are in hand. */
  async fetchSessions(wanted, untilId) {
    let sessions = [];
    let before = null;
    let more = true;
    const reached = () => !untilId || sessions.length >= wanted + PAGE || sessions.some((s) => s.id === untilId);
    while (more && (sessions.length < wanted || !reached())) {
      const query = new URLSearchParams({ limit: String(Math.min(MAX_PAGE, Math.max(PAGE, wanted - sessions.length))) });
      if (before) query.set("before", before);
      if (this.origin !== "page") query.set("origin", this.origin);
      const data = await api("GET", `/api/sessions?${query}`);
      sessions = sessions.concat(data.sessions);
      more = !!data.has_more;
      before = data.next_before;
    }
    return { sessions, more, before };
  }

  /** Reload the sessions (as many as are shown) and the runs going from the server and redraw. */
  async refresh() {
    let runs = null;
    let page;
    const generation = ++this.generation;
    try {
      [page, runs] = await Promise.all([
        // as many as are shown, down to the last one shown (sessions that moved up push it down)
        this.fetchSessions(Math.max(PAGE, this.sessions.length), this.sessions.length > PAGE ? this.sessions.at(-1).id : null),
        api("GET", "/api/agent/chat/runs?limit=50").then((data) => data.runs).catch(() => null),
      ]);
    } catch (err) {
      this.options.toast(`Could not load sessions: ${err.message}`);
      return;
    }
    if (generation !== this.generation) return; // a newer reload is under way
    this.sessions = page.sessions;
    this.hasMore = page.more;
    this.nextBefore = page.before;
    this.loadingMore = null;
    if (runs) this.running = new Set(runs.filter((r) => r.status === "running").map((r) => r.session_id));
    this.render();
    // A run started elsewhere (another tab, a background job) ends on its own: look again later.
    clearTimeout(this.poll);
    if (this.running.size) this.poll = setTimeout(() => this.refresh(), 3000);
  }

  /** Append the next page of older sessions (one request at a time). */
  loadMore() {
    if (!this.hasMore || this.loadingMore || !this.nextBefore) return this.loadingMore || Promise.resolve();
    const generation = this.generation;
    const query = new URLSearchParams({ limit: String(PAGE), before: this.nextBefore });
    if (this.origin !== "page") query.set("origin", this.origin);
    this.loadingMore = api("GET", `/api/sessions?${query}`).then((data) => {
      if (generation !== this.generation) return;
      const shown = new Set(this.sessions.map((s) => s.id));
      this.sessions = this.sessions.concat(data.sessions.filter((s) => !shown.has(s.id)));
      this.hasMore = !!data.has_more;
      this.nextBefore = data.next_before;
    }).catch((err) => {
      if (generation === this.generation) this.options.toast(`Could not load more sessions: ${err.message}`);
    }).finally(() => {
      if (generation !== this.generation) return;
      this.loadingMore = null;
      this.render();
    });
    return this.loadingMore;
  }

  /** List the page's own chats (`page`) or the conversations made through /v1 (`api`); remembered. */
  setOrigin(origin) {
    this.origin = origin === "api" ? "api" : "page";
    localStorage.setItem(ORIGIN_KEY, this.origin);
    this.sessions = [];
    return this.refresh();
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
    if (this.hasMore) {
      const li = el("li", "sessions-more-item");
      const more = button(this.loadingMore ? "Loading…" : "More sessions", "sessions-more ghost", () => this.loadMore());
      li.appendChild(more);
      this.list.appendChild(li);
    }
    this.list.dataset.hasMore = this.hasMore ? "true" : "false";
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
