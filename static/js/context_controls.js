// The composer's context controls: the "Web" toggle (chat turns search the web first), the
// workspace picker (agent turns, admins and single-user mode only) and the Memories button.
// chat.js asks turnFields(mode) for the extra fields of each turn it sends.

import { api } from "./api.js";
import { button, el } from "./dom.js";
import { MemoriesScreen } from "./memories.js";

const WORKSPACE_KEY = "odysseus-workspace";
const WEB_KEY = "odysseus-use-web";

export class ContextControls {
  constructor({ openModal, toast }) {
    this.openModal = openModal;
    this.toast = toast;
    this.web = /** @type {HTMLInputElement} */ (document.getElementById("use-web"));
    this.picker = document.getElementById("workspace-pick");
    this.memories = document.getElementById("memories-open");
    this.canChoose = false;
    this.workspace = localStorage.getItem(WORKSPACE_KEY) || "";
    this.web.checked = localStorage.getItem(WEB_KEY) === "true";
    this.web.addEventListener("change", () => localStorage.setItem(WEB_KEY, String(this.web.checked)));
    this.picker.addEventListener("click", () => this.browse(this.workspace || ""));
    this.memories.addEventListener("click", () => this.openMemories());
    for (const radio of document.querySelectorAll('input[name="mode"]')) {
      radio.addEventListener("change", () => this.update());
    }
    this.update();
  }

  mode() {
    const checked = /** @type {HTMLInputElement | null} */ (document.querySelector('input[name="mode"]:checked'));
    return checked ? checked.value : "chat";
  }

  /** Who may choose a workspace: the owner in single-user mode, or an admin (from /api/auth/status). */
  setAccount(status) {
    this.canChoose = !!status && (status.mode === "none" || !!(status.user && status.user.is_admin));
    if (!this.canChoose) this.setWorkspace("");
    this.update();
  }

  update() {
    const agent = this.mode() === "agent" || this.mode() === "workflow";
    this.web.closest("label").hidden = agent;
    this.picker.hidden = !(agent && this.canChoose);
    this.picker.textContent = this.workspace ? `Workspace: ${this.workspace}` : "Workspace: this chat's";
    this.picker.title = this.workspace || "The agent works in this chat's own folder";
  }

  /** The context fields of a turn sent in `mode`. */
  turnFields(mode) {
    const fields = {};
    if (mode === "chat" && this.web.checked) fields.use_web = true;
    if (mode === "agent" && this.canChoose && this.workspace) fields.workspace = this.workspace;
    return fields;
  }

  setWorkspace(path) {
    this.workspace = path || "";
    if (this.workspace) localStorage.setItem(WORKSPACE_KEY, this.workspace);
    else localStorage.removeItem(WORKSPACE_KEY);
    this.update();
  }

  /** The server refused the chosen workspace: clear the selection (the reply says why). */
  rejected(path) {
    if (!path || path === this.workspace) this.setWorkspace("");
    this.toast("The chosen workspace was not accepted; the agent used this chat's folder.");
  }

  async openMemories() {
    const screen = new MemoriesScreen({ toast: this.toast });
    this.openModal("Memories", screen.el);
    await screen.load();
  }

  /** The workspace picker: directories under `path`, Up, Use this folder, and Reset. */
  async browse(path) {
    let data;
    try {
      data = await api("GET", `/api/workspace/browse${path ? `?path=${encodeURIComponent(path)}` : ""}`);
    } catch (err) {
      if (path) return this.browse("");
      this.toast(`Could not list folders: ${err.message}`);
      return;
    }
    const box = el("section", "workspace-picker");
    box.appendChild(el("p", "workspace-path", data.path));
    const bar = el("div", "workspace-bar");
    if (data.parent) bar.appendChild(button("Up", "up", () => this.browse(data.parent)));
    const use = button("Use this folder", "primary use", () => { this.setWorkspace(data.path); this.closeModal(); });
    use.disabled = !data.selectable;
    bar.append(use, button("Use this chat's folder", "reset", () => { this.setWorkspace(""); this.closeModal(); }));
    box.appendChild(bar);
    const list = el("ul", "workspace-list");
    for (const entry of data.entries) {
      const item = el("li");
      const open = button(entry.name, `folder${entry.selectable ? "" : " blocked"}`, () => this.browse(entry.path));
      if (!entry.selectable) open.title = "Cannot be a workspace, but may be opened";
      item.appendChild(open);
      list.appendChild(item);
    }
    if (!data.entries.length) list.appendChild(el("li", "muted", "No folders here."));
    if (data.truncated) list.appendChild(el("li", "muted", "More folders exist than are shown."));
    box.appendChild(list);
    this.openModal("Choose the agent's workspace", box);
  }

  closeModal() {
    /** @type {HTMLDialogElement} */ (document.getElementById("modal")).close();
  }
}
