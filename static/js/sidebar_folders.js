// The sidebar's folders (GET/POST /api/folders, PATCH/DELETE /api/folders/{id}): each a heading that
// opens and closes (remembered in this browser) over its chats, a drop target for dragged chats, and a
// "⋯" menu to rename it in place or delete it (its chats stay, out of any folder). Names are shown as
// text. A new folder is named in place at the top of the folders, optionally with a chat to move into it.

import { api } from "./api.js";
import { button, el } from "./dom.js";
import { openMenu } from "./popup_menu.js";
import { SessionList } from "./session_list.js";

const CLOSED_KEY = "odysseus.closedFolders";
const MAX_NAME = 100;

function loadClosed() {
  try {
    const ids = JSON.parse(localStorage.getItem(CLOSED_KEY) || "[]");
    return new Set(Array.isArray(ids) ? ids.map(String) : []);
  } catch (err) {
    return new Set();
  }
}

export class FolderViews {
  /** @param {import("./sidebar.js").Sidebar} sidebar */
  constructor(sidebar) {
    this.sidebar = sidebar;
    /** @type {{id: string, name: string, session_count: number}[]} */
    this.folders = [];
    /** @type {Map<string, SessionList>} folder id -> its chats (those not pinned: Pinned shows them) */
    this.byId = new Map();
    this.closed = loadClosed();
  }

  isOpen(folder) {
    return !this.closed.has(folder.id);
  }

  listOf(folderId) {
    let list = this.byId.get(folderId);
    if (!list) {
      list = new SessionList({ folder_id: folderId, pinned: "false" });
      this.byId.set(folderId, list);
    }
    return list;
  }

  /** The chat lists of the open folders. */
  lists() {
    return this.folders.filter((f) => this.isOpen(f)).map((f) => this.listOf(f.id));
  }

  /** Fetch every open folder's chats (a folder deleted meanwhile elsewhere shows none). */
  async fetch(folders, origin) {
    const open = folders.filter((f) => this.isOpen(f));
    const pages = await Promise.all(open.map((f) => this.listOf(f.id).fetchShown(origin).catch(() => null)));
    return { folders, pages: open.map((f, index) => [f.id, pages[index]]) };
  }

  /** Take what `fetch` answered as what is shown. */
  apply({ folders, pages }) {
    this.folders = folders;
    for (const [id, page] of pages) this.listOf(id).apply(page || { sessions: [], more: false, before: null });
    const known = new Set(folders.map((f) => f.id));
    for (const id of [...this.byId.keys()]) if (!known.has(id)) this.byId.delete(id);
  }

  /** One list item per folder: its heading (toggle, count, menu) and, when open, its chats. */
  render() {
    return this.folders.map((folder) => {
      const li = el("li", "folder");
      li.dataset.folderId = folder.id;
      li.dataset.drop = `folder:${folder.id}`;
      const open = this.isOpen(folder);
      const head = el("div", "folder-head");
      const toggle = button(folder.name, "folder-toggle", () => this.toggle(folder));
      toggle.title = folder.name;
      toggle.setAttribute("aria-expanded", open ? "true" : "false");
      const caret = el("span", "folder-caret", open ? "▾" : "▸");
      caret.setAttribute("aria-hidden", "true");
      toggle.prepend(caret);
      const count = el("span", "folder-count", String(folder.session_count));
      count.setAttribute("aria-label", `${folder.session_count} chats`);
      toggle.append(count);
      const more = button("⋯", "more icon", () => this.menu(folder, more), `Actions for folder ${folder.name}`);
      head.append(toggle, more);
      li.appendChild(head);
      if (open) {
        const items = el("ul", "group-items");
        const list = this.listOf(folder.id);
        for (const session of list.sessions) items.appendChild(this.sidebar.row(session));
        if (!list.sessions.length) items.appendChild(el("li", "folder-empty muted", "Empty: drag chats here."));
        if (list.hasMore) {
          const more = el("li", "sessions-more-item");
          more.appendChild(button("More", "sessions-more ghost", () => this.sidebar.loadMore(list)));
          items.appendChild(more);
        }
        li.appendChild(items);
      }
      return li;
    });
  }

  toggle(folder) {
    if (this.isOpen(folder)) this.closed.add(folder.id);
    else this.closed.delete(folder.id);
    localStorage.setItem(CLOSED_KEY, JSON.stringify([...this.closed]));
    if (this.isOpen(folder) && !this.listOf(folder.id).sessions.length) this.sidebar.refresh();
    else this.sidebar.render();
  }

  menu(folder, anchor) {
    openMenu(anchor, `Actions for folder ${folder.name}`, [
      { label: "Rename", className: "menu-rename-folder", onSelect: () => this.rename(folder) },
      { label: "Delete folder", className: "menu-delete-folder", onSelect: () => this.remove(folder) },
    ], () => this.sidebar.flush());
  }

  rename(folder) {
    const head = this.sidebar.list.querySelector(`.folder[data-folder-id="${CSS.escape(folder.id)}"] .folder-head`);
    if (!head) return;
    this.sidebar.editInPlace(head, folder.name, "New folder name", MAX_NAME, async (name) => {
      try {
        await api("PATCH", `/api/folders/${encodeURIComponent(folder.id)}`, { name });
      } catch (err) {
        this.sidebar.options.toast(`Could not rename the folder: ${err.message}`);
      }
    });
  }

  async remove(folder) {
    if (!confirm(`Delete the folder "${folder.name}"? Its chats stay, out of any folder.`)) return;
    try {
      await api("DELETE", `/api/folders/${encodeURIComponent(folder.id)}`);
    } catch (err) {
      this.sidebar.options.toast(`Could not delete the folder: ${err.message}`);
    }
    this.sidebar.refresh();
  }

  /** Name a new folder in place (above the folders); with `session`, move that chat into it. */
  create(session = null) {
    const sidebar = this.sidebar;
    const li = el("li", "folder folder-new");
    const list = sidebar.list;
    list.insertBefore(li, list.querySelector(".folder, .session-group:not([data-group=pinned])"));
    sidebar.editInPlace(li, "", "New folder name", MAX_NAME, async (name) => {
      let folder;
      try {
        folder = await api("POST", "/api/folders", { name });
      } catch (err) {
        sidebar.options.toast(`Could not make the folder: ${err.message}`);
        return;
      }
      if (session) await sidebar.update(session, { folder_id: folder.id }, `Moved to "${folder.name}".`);
    });
  }
}
