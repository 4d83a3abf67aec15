// The sidebar's list of the user's chats: Pinned on top, then the folders (each opens and closes), then
// the other chats grouped by date (Today, Yesterday, Previous 7 days, then by month). "Archived"
// switches the list to the archived chats. A chat is opened, renamed in place (Enter saves, Escape
// cancels), deleted after a confirmation, organised with its "⋯" menu (chat_menu.js) or dragged onto a
// folder, Pinned, or the dated list (out of its folder). Every change is written through the API and the
// list is drawn again from the server. It owns no page state: the page tells it which session is open.
// Each list comes a page at a time (session_list.js); scrolling to the end, or "More sessions", loads the
// next page of the dated (or archived) list.

import { api } from "./api.js";
import { chatMenuItems } from "./chat_menu.js";
import { groupByDate } from "./date_groups.js";
import { button, el } from "./dom.js";
import { menuOpen, openMenu } from "./popup_menu.js";
import { SessionList } from "./session_list.js";
import { FolderViews } from "./sidebar_folders.js";

const NEAR_END_PX = 200;
const ORIGIN_KEY = "odysseus.sessionOrigin";
const DRAG_TYPE = "application/x-odysseus-session";

/** Options: {current() -> open session id, onOpen(id), onDeleted(id), onTitle(title), toast(text)}. */
export class Sidebar {
  constructor(list, options) {
    this.list = list;
    this.options = options;
    this.main = new SessionList({ pinned: "false", folder_id: "none" }); // the dated chats
    this.pinned = new SessionList({ pinned: "true" });
    this.archivedList = new SessionList({ archived: "true" });
    this.archived = false; // the Archived view is open
    this.folders = new FolderViews(this);
    this.running = new Set(); // sessions with a run going (server list plus this tab's own turns)
    this.local = new Set();
    this.titles = new Map(); // every session seen: the header's title even when its list is not loaded
    this.poll = null;
    this.generation = 0; // bumps on every reload: a page fetched for an older list is dropped
    /** @type {HTMLInputElement | null} an input in the list (rename, new folder): redraws wait for it */
    this.editing = null;
    this.pendingRender = false;
    this.dragging = null;
    this.origin = localStorage.getItem(ORIGIN_KEY) === "api" ? "api" : "page"; // GET /api/sessions?origin=
    this.actions = {
      folders: () => this.folders.folders,
      update: (session, changes, done) => this.update(session, changes, done),
      newFolder: (session) => this.folders.create(session),
      toast: (text) => this.options.toast(text),
    };
    const scroller = list.parentElement;
    scroller.addEventListener("scroll", () => {
      if (scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < NEAR_END_PX) this.loadMore();
    }, { passive: true });
    this.listenForDrops();
  }

  /** The list "More sessions" pages: the dated chats, or the archived ones. */
  primary() {
    return this.archived ? this.archivedList : this.main;
  }

  /** Every loaded list. */
  lists() {
    return this.archived ? [this.archivedList] : [this.pinned, ...this.folders.lists(), this.main];
  }

  /** A loaded session by id, or undefined. */
  find(id) {
    for (const list of this.lists()) {
      const found = list.sessions.find((s) => s.id === id);
      if (found) return found;
    }
    return undefined;
  }

  /** Reload every list shown (each as long as it is shown) and the runs going, then redraw. */
  async refresh() {
    const generation = ++this.generation;
    const runsAsked = api("GET", "/api/agent/chat/runs?limit=50").then((data) => data.runs).catch(() => null);
    let pages;
    let folderPages = null;
    try {
      if (this.archived) {
        pages = [await this.archivedList.fetchShown(this.origin)];
      } else {
        const [folders, pinned, main] = await Promise.all([
          api("GET", "/api/folders").then((data) => data.folders),
          this.pinned.fetchShown(this.origin), this.main.fetchShown(this.origin),
        ]);
        pages = [pinned, main];
        folderPages = await this.folders.fetch(folders, this.origin);
      }
    } catch (err) {
      if (generation === this.generation) this.options.toast(`Could not load sessions: ${err.message}`);
      return;
    }
    const runs = await runsAsked;
    if (generation !== this.generation) return; // a newer reload is under way
    if (this.archived) this.archivedList.apply(pages[0]);
    else {
      this.pinned.apply(pages[0]);
      this.main.apply(pages[1]);
      this.folders.apply(folderPages);
    }
    if (runs) this.running = new Set(runs.filter((r) => r.status === "running").map((r) => r.session_id));
    this.render();
    // A run started elsewhere (another tab, a background job) ends on its own: look again later.
    clearTimeout(this.poll);
    if (this.running.size) this.poll = setTimeout(() => this.refresh(), 3000);
  }

  /** Append the next page of `list` (the dated or archived chats by default; one request at a time). */
  loadMore(list = this.primary()) {
    if (!list.hasMore || list.loadingMore || !list.nextBefore) return list.loadingMore || Promise.resolve();
    const generation = this.generation;
    list.loadingMore = list.fetchNext(this.origin).then((data) => {
      if (generation === this.generation) list.append(data);
    }).catch((err) => {
      if (generation === this.generation) this.options.toast(`Could not load more sessions: ${err.message}`);
    }).finally(() => {
      if (generation !== this.generation) return;
      list.loadingMore = null;
      this.render();
    });
    return list.loadingMore;
  }

  /** List the page's own chats (`page`) or the conversations made through /v1 (`api`); remembered. */
  setOrigin(origin) {
    this.origin = origin === "api" ? "api" : "page";
    localStorage.setItem(ORIGIN_KEY, this.origin);
    for (const list of [this.main, this.pinned, this.archivedList, ...this.folders.lists()]) list.clear();
    return this.refresh();
  }

  /** Show the archived chats (true) or the others (false). */
  setArchived(archived) {
    this.archived = !!archived;
    this.archivedList.clear();
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

  /** Change a chat (`PATCH /api/sessions/{id}`: folder_id, pinned, archived), then reload the lists. */
  async update(session, changes, done) {
    try {
      await api("PATCH", `/api/sessions/${encodeURIComponent(session.id)}`, changes);
    } catch (err) {
      this.options.toast(`Could not change "${session.title}": ${err.message}`);
      return false;
    }
    if (done) this.options.toast(done);
    await this.refresh();
    return true;
  }

  /** Open the "⋯" menu of `session` under `anchor` (the sidebar row's, or the page header's). */
  chatMenu(anchor, session) {
    openMenu(anchor, `Actions for ${session.title}`, chatMenuItems(session, this.actions), () => this.flush());
  }

  /** Redraw now if a redraw waited for an inline input or a menu. */
  flush() {
    if (this.pendingRender) this.render();
  }

  /** Redraw from the last lists (marks the open session). Waits while an input or a menu is open in it. */
  render() {
    if (this.editing || menuOpen()) {
      this.pendingRender = true;
      return;
    }
    this.pendingRender = false;
    const currentId = this.options.current();
    this.list.textContent = "";
    this.list.dataset.view = this.archived ? "archived" : "chats";
    const primary = this.primary();
    if (!this.archived) {
      if (this.pinned.sessions.length) this.list.appendChild(this.group("pinned", "Pinned", this.pinned.sessions));
      for (const node of this.folders.render()) this.list.appendChild(node);
    }
    const groups = groupByDate(primary.sessions);
    if (!groups.length && !this.archived && (this.pinned.sessions.length || this.folders.folders.length)) {
      groups.push({ key: "none", label: "Chats", sessions: [] }); // somewhere to drop a chat out of its folder
    }
    for (const group of groups) this.list.appendChild(this.group(group.key, group.label, group.sessions));
    if (this.archived && !primary.sessions.length) this.list.appendChild(el("li", "sessions-empty muted", "No archived chats."));
    if (primary.hasMore) {
      const li = el("li", "sessions-more-item");
      li.appendChild(button(primary.loadingMore ? "Loading…" : "More sessions", "sessions-more ghost", () => this.loadMore()));
      this.list.appendChild(li);
    }
    this.list.dataset.hasMore = primary.hasMore ? "true" : "false";
    for (const list of this.lists()) for (const s of list.sessions) this.titles.set(s.id, s.title);
    if (!currentId || this.titles.has(currentId)) this.options.onTitle(currentId ? this.titles.get(currentId) : null);
  }

  /** A titled group of chats: Pinned, or a date's; a drop target (Pinned pins, a date group unfiles). */
  group(key, label, sessions) {
    const li = el("li", "session-group");
    li.dataset.group = key;
    if (!this.archived) li.dataset.drop = key === "pinned" ? "pinned" : "chats";
    const items = el("ul", "group-items");
    for (const session of sessions) items.appendChild(this.row(session));
    if (!sessions.length) items.appendChild(el("li", "folder-empty muted", "Drop a chat here to take it out of its folder."));
    li.append(el("h3", "group-title", label), items);
    return li;
  }

  /** One chat: open, rename, its menu, delete; draggable onto a folder, Pinned or the dated list. */
  row(session) {
    const li = el("li", "session");
    li.dataset.sessionId = session.id;
    const open = button(session.title, "open", () => this.options.onOpen(session.id));
    open.title = session.title;
    if (session.id === this.options.current()) open.setAttribute("aria-current", "page");
    if (this.running.has(session.id) || this.local.has(session.id)) {
      li.classList.add("running");
      const dot = el("span", "run-dot");
      dot.title = "A reply is being written";
      dot.setAttribute("role", "img");
      dot.setAttribute("aria-label", "reply in progress");
      open.prepend(dot);
    }
    const more = button("⋯", "more icon", () => this.chatMenu(more, session), `Actions for ${session.title}`);
    li.append(open,
              button("✎", "rename icon", () => this.rename(li, session), `Rename ${session.title}`),
              more,
              button("✕", "delete icon", () => this.remove(session), `Delete ${session.title}`));
    li.draggable = true;
    li.addEventListener("dragstart", (e) => {
      this.dragging = session;
      e.dataTransfer.setData(DRAG_TYPE, session.id);
      e.dataTransfer.setData("text/plain", session.title);
      e.dataTransfer.effectAllowed = "move";
      this.list.classList.add("dragging");
    });
    li.addEventListener("dragend", () => this.endDrag());
    return li;
  }

  listenForDrops() {
    const targetOf = (event) => {
      const node = event.target instanceof Element ? event.target.closest("[data-drop]") : null;
      return this.dragging && node && this.list.contains(node) ? node : null;
    };
    this.list.addEventListener("dragover", (e) => {
      const target = targetOf(e);
      if (!target) return;
      e.preventDefault();
      e.dataTransfer.dropEffect = "move";
      for (const node of this.list.querySelectorAll(".drop-target")) if (node !== target) node.classList.remove("drop-target");
      target.classList.add("drop-target");
    });
    this.list.addEventListener("drop", (e) => {
      const target = targetOf(e);
      const session = this.dragging;
      this.endDrag();
      if (!target || !session || e.dataTransfer.getData(DRAG_TYPE) !== session.id) return;
      e.preventDefault();
      this.dropOn(session, target.dataset.drop);
    });
  }

  endDrag() {
    this.dragging = null;
    this.list.classList.remove("dragging");
    for (const node of this.list.querySelectorAll(".drop-target")) node.classList.remove("drop-target");
  }

  /** Where a chat was dropped: a folder (out of Pinned, into it), Pinned, or the dated list (out of both). */
  dropOn(session, where) {
    if (where === "pinned") {
      if (!session.pinned) this.update(session, { pinned: true });
    } else if (where.startsWith("folder:")) {
      const folderId = where.slice("folder:".length);
      const folder = this.folders.folders.find((f) => f.id === folderId);
      if (session.folder_id !== folderId || session.pinned) {
        this.update(session, { folder_id: folderId, pinned: false }, folder ? `Moved to "${folder.name}".` : undefined);
      }
    } else if (session.folder_id || session.pinned) {
      this.update(session, { folder_id: null, pinned: false });
    }
  }

  /**
   * Put an input in `container` holding `value`; Enter (or leaving it) saves a changed, non-empty text
   * with `save(text)`, Escape cancels. The lists are drawn again afterwards.
   */
  editInPlace(container, value, label, maxLength, save) {
    const input = /** @type {HTMLInputElement} */ (el("input", "rename-input"));
    input.value = value;
    input.maxLength = maxLength;
    input.setAttribute("aria-label", label);
    container.replaceChildren(input);
    this.editing = input;
    input.focus();
    input.select();
    let done = false;
    const finish = async (keep) => {
      if (done) return;
      done = true;
      const text = input.value.trim();
      if (keep && text && text !== value) await save(text);
      if (this.editing === input) this.editing = null; // not another input opened meanwhile
      this.refresh();
    };
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") finish(true);
      if (e.key === "Escape") finish(false);
    });
    input.addEventListener("blur", () => finish(true));
  }

  rename(li, session) {
    this.editInPlace(li, session.title, "New session title", 200, async (title) => {
      try {
        await api("PATCH", `/api/sessions/${encodeURIComponent(session.id)}`, { title });
      } catch (err) {
        this.options.toast(`Could not rename: ${err.message}`);
      }
    });
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
