// The memories screen (in the page's modal): the two switches, add, search, and per memory pin,
// edit and delete. Every change goes straight to /api/memory; the list is then drawn again from
// the server's answer, so what is shown is what is stored.

import { api } from "./api.js";
import { button, el } from "./dom.js";

function describe(memory) {
  const uses = memory.uses === 1 ? "used once" : `used ${memory.uses || 0} times`;
  return [memory.category || "general", memory.source === "auto" ? "learnt automatically" : "added by you", uses]
    .join(" · ");
}

export class MemoriesScreen {
  constructor({ toast }) {
    this.toast = toast;
    this.query = "";
    this.el = el("section", "memories-screen");
    this.el.setAttribute("aria-label", "Memories");

    const switches = el("div", "memory-switches");
    this.enabled = this.checkbox("memory-enabled", "Use memories in replies");
    this.auto = this.checkbox("memory-auto", "Learn memories automatically after replies");
    switches.append(this.enabled.label, this.auto.label);
    this.enabled.input.addEventListener("change", () => this.saveSettings({ enabled: this.enabled.input.checked }));
    this.auto.input.addEventListener("change", () => this.saveSettings({ auto_extract: this.auto.input.checked }));

    this.addForm = el("form", "memory-add");
    this.addText = el("textarea");
    this.addText.rows = 2;
    this.addText.maxLength = 1000;
    this.addText.placeholder = "Something to remember, e.g. “I prefer metric units”";
    this.addText.setAttribute("aria-label", "New memory");
    this.addCategory = el("input");
    this.addCategory.placeholder = "category";
    this.addCategory.maxLength = 40;
    this.addCategory.setAttribute("aria-label", "Category");
    this.addPinned = this.checkbox("memory-add-pinned", "Pin");
    const add = el("button", "primary", "Add memory");
    add.type = "submit";
    this.addForm.append(this.addText, this.addCategory, this.addPinned.label, add);
    this.addForm.addEventListener("submit", (e) => { e.preventDefault(); this.add(); });

    this.searchForm = el("form", "memory-search");
    this.searchInput = el("input");
    this.searchInput.type = "search";
    this.searchInput.placeholder = "Search memories";
    this.searchInput.setAttribute("aria-label", "Search memories");
    this.searchForm.appendChild(this.searchInput);
    this.searchForm.addEventListener("submit", (e) => { e.preventDefault(); this.search(this.searchInput.value); });
    this.searchInput.addEventListener("input", () => { if (!this.searchInput.value.trim()) this.search(""); });

    this.status = el("p", "memory-status muted");
    this.status.setAttribute("role", "status");
    this.list = el("ul", "memory-list");
    this.el.append(switches, this.addForm, this.searchForm, this.status, this.list);
  }

  checkbox(id, text) {
    const label = el("label", "switch");
    const input = el("input");
    input.type = "checkbox";
    input.id = id;
    label.append(input, document.createTextNode(` ${text}`));
    return { label, input };
  }

  /** Load the switches and the list (or the current search). */
  async load() {
    try {
      const data = await api("GET", "/api/memory");
      this.enabled.input.checked = !!data.settings.enabled;
      this.auto.input.checked = !!data.settings.auto_extract;
      if (this.query) await this.search(this.query);
      else this.render(data.memories);
    } catch (err) {
      this.toast(`Could not load memories: ${err.message}`);
    }
  }

  async saveSettings(changes) {
    try {
      const saved = await api("PATCH", "/api/memory/settings", changes);
      this.enabled.input.checked = !!saved.enabled;
      this.auto.input.checked = !!saved.auto_extract;
    } catch (err) {
      this.toast(`Could not save: ${err.message}`);
      this.load();
    }
  }

  async add() {
    const text = this.addText.value.trim();
    if (!text) return;
    const body = { text, pinned: this.addPinned.input.checked };
    if (this.addCategory.value.trim()) body.category = this.addCategory.value.trim();
    try {
      await api("POST", "/api/memory", body);
      this.addText.value = "";
      this.addCategory.value = "";
      this.addPinned.input.checked = false;
      await this.load();
    } catch (err) {
      this.toast(`Could not add: ${err.message}`);
    }
  }

  async search(query) {
    this.query = query.trim();
    if (!this.query) return this.load();
    try {
      const data = await api("GET", `/api/memory/search?q=${encodeURIComponent(this.query)}`);
      this.render(data.memories);
    } catch (err) {
      this.toast(`Could not search: ${err.message}`);
    }
  }

  async change(method, url, body) {
    try {
      await api(method, url, body);
      await this.load();
    } catch (err) {
      this.toast(`Could not save: ${err.message}`);
    }
  }

  render(memories) {
    this.list.textContent = "";
    this.status.textContent = this.query
      ? `${memories.length} found for “${this.query}”`
      : (memories.length ? "" : "No memories yet. Add one above, or ask the agent to remember something.");
    for (const memory of memories) this.list.appendChild(this.row(memory));
  }

  row(memory) {
    const id = encodeURIComponent(memory.id);
    const item = el("li", `memory-row${memory.pinned ? " pinned" : ""}`);
    item.dataset.memoryId = memory.id;
    const text = el("p", "memory-text", memory.text);
    const meta = el("p", "memory-meta muted", describe(memory));
    const actions = el("div", "memory-actions");
    actions.append(
      button(memory.pinned ? "Unpin" : "Pin", "pin", () => this.change("POST", `/api/memory/${id}/pin`,
                                                                       { pinned: !memory.pinned })),
      button("Edit", "edit", () => this.edit(item, memory)),
      button("Delete", "delete", () => this.change("DELETE", `/api/memory/${id}`)));
    if (memory.pinned) item.appendChild(el("span", "memory-badge", "pinned"));
    item.append(text, meta, actions);
    return item;
  }

  edit(item, memory) {
    if (item.querySelector("form")) return;
    const form = el("form", "memory-edit");
    const area = el("textarea");
    area.value = memory.text;
    area.maxLength = 1000;
    area.setAttribute("aria-label", "Edit memory");
    const category = el("input");
    category.value = memory.category || "";
    category.setAttribute("aria-label", "Category");
    const save = el("button", "primary", "Save");
    save.type = "submit";
    const cancel = button("Cancel", "cancel", () => this.load());
    form.append(area, category, save, cancel);
    item.textContent = "";
    item.appendChild(form);
    area.focus();
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const body = { text: area.value };
      if (category.value.trim()) body.category = category.value.trim();
      this.change("PATCH", `/api/memory/${encodeURIComponent(memory.id)}`, body);
    });
  }
}
