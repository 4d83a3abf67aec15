// The page's chrome around the conversation: the model picker, the sidebar on a phone, the theme
// button, the account bar, importing a chat, the settings button and applying saved preferences.
// chat.js (the page) makes one PageChrome and hands it what the chrome reads and calls of the page.

import { api } from "./api.js";
import { showStreamVerdict } from "./page_notices.js";
import { openSettings } from "./settings.js";

/**
 * @typedef {object} ChromeHooks
 * @property {Record<string, any>} ui the page's elements (chat.js `ui`)
 * @property {{models: string[], status: any}} state the page's state: the model ids and the auth status are kept here
 * @property {(text: string) => void} toast
 * @property {{renderPicker: (on: boolean) => void}} compare compare mode's model picker (compare.js)
 * @property {() => string} mode the chat/agent/compare switch's value
 * @property {(value: string) => void} setMode
 * @property {{setAccount: (status: any) => void}} controls the context controls (context_controls.js)
 * @property {() => void} detachTurn leave the running turn's stream (the run goes on)
 * @property {() => void} newChat
 * @property {() => Promise<void>} refreshSessions
 * @property {(sessionId: string) => Promise<void>} openSession
 * @property {(title: string, node: Node) => void} openModal
 */

export class PageChrome {
  /** @param {ChromeHooks} page */
  constructor(page) {
    this.page = page;
    const { ui } = page;
    ui.model.addEventListener("change", () => localStorage.setItem("odysseus-model", ui.model.value));
    ui.openSidebar.addEventListener("click", () => {
      ui.app.classList.add("sidebar-open");
      ui.openSidebar.setAttribute("aria-expanded", "true");
      ui.newChat.focus();
    });
    ui.closeSidebar.addEventListener("click", () => { this.closeSidebarOnPhone(); ui.openSidebar.focus(); });
    ui.sidebar.addEventListener("keydown", (e) => { if (e.key === "Escape") this.closeSidebarOnPhone(); });
    ui.newChat.addEventListener("click", () => page.newChat());
    document.querySelector(".scrim").addEventListener("click", () => this.closeSidebarOnPhone());
    ui.theme.addEventListener("click", () => window.odysseusTheme.toggle());
    document.addEventListener("odysseus:theme", () => this.themeLabel());
    ui.signOut.addEventListener("click", () => this.signOut());
    ui.importFile.addEventListener("change", () => this.importChat());
    ui.settings.addEventListener("click", () => this.openSettings());
  }

  /** Fill the model picker from `GET /api/models` (providers that failed show as disabled entries). */
  async loadModels() {
    const { ui, state, compare, mode, toast } = this.page;
    try {
      const data = await api("GET", "/api/models");
      ui.model.textContent = "";
      state.models = data.models.map((m) => m.id);
      for (const model of data.models) {
        ui.model.appendChild(new Option(model.id, model.id));
      }
      for (const failure of data.errors || []) {
        const option = new Option(`${failure.provider}: unavailable`, "");
        option.disabled = true;
        option.title = failure.error;
        ui.model.appendChild(option);
      }
      compare.renderPicker(mode() === "compare");
      const saved = localStorage.getItem("odysseus-model");
      if (saved && data.models.some((m) => m.id === saved)) ui.model.value = saved;
    } catch (err) {
      toast(`Could not load models: ${err.message}`);
    }
  }

  /** On a phone the sidebar is a drawer over the chat: close it (opening a session does). */
  closeSidebarOnPhone() {
    const { ui } = this.page;
    ui.app.classList.remove("sidebar-open");
    ui.openSidebar.setAttribute("aria-expanded", "false");
  }

  /** The theme button names the theme it switches to. */
  themeLabel() {
    const { ui } = this.page;
    const dark = document.documentElement.dataset.effectiveTheme === "dark";
    ui.theme.textContent = dark ? "☀ Light theme" : "☾ Dark theme";
    ui.theme.setAttribute("aria-label", dark ? "Switch to light theme" : "Switch to dark theme");
  }

  /** Show who is signed in and a Sign out button; single-user mode (AUTH=none) shows neither. */
  async loadAccount() {
    const { ui, state, controls } = this.page;
    try {
      const status = await api("GET", "/api/auth/status");
      state.status = status;
      const user = status.mode === "password" && status.signed_in ? status.user : null;
      ui.account.hidden = !user;
      ui.accountName.textContent = user ? user.username : "";
      controls.setAccount(status);
    } catch (err) {
      ui.account.hidden = true;
      controls.setAccount(null);
    }
  }

  async signOut() {
    const { ui, toast, detachTurn } = this.page;
    ui.signOut.disabled = true;
    try {
      await api("POST", "/api/auth/logout", {});
    } catch (err) {
      ui.signOut.disabled = false;
      toast(`Could not sign out: ${err.message}`);
      return;
    }
    detachTurn();
    location.assign("/login");
  }

  /** Import the chosen file (a chat exported as JSON) as a new session and open it. */
  async importChat() {
    const { ui, toast, refreshSessions, openSession } = this.page;
    const file = ui.importFile.files[0];
    ui.importFile.value = "";
    if (!file) return;
    let doc;
    try {
      doc = JSON.parse(await file.text());
    } catch (err) {
      toast("Could not import: the file is not JSON (export a chat as .json first).");
      return;
    }
    try {
      const session = await api("POST", "/api/sessions/import", doc);
      await refreshSessions();
      await openSession(session.id);
      toast(`Imported "${session.title}".`);
    } catch (err) {
      toast(`Could not import: ${err.message}`);
    }
  }

  /**
   * Apply saved preferences to this page: theme, and the default model and mode. On the first load
   * (`initial`) what this browser remembers (its own theme, model and mode) wins.
   */
  applySettings(settings, { initial = false } = {}) {
    const { ui, setMode } = this.page;
    if (!settings) return;
    if (!initial || !localStorage.getItem("odysseus-theme")) {
      if (!initial || settings.theme !== "auto") window.odysseusTheme.set(settings.theme === "auto" ? "" : settings.theme);
    }
    if (!initial || !localStorage.getItem("odysseus-mode")) setMode(settings.default_mode);
    if (settings.default_model && (!initial || !localStorage.getItem("odysseus-model"))
        && [...ui.model.options].some((o) => o.value === settings.default_model)) {
      ui.model.value = settings.default_model;
      localStorage.setItem("odysseus-model", settings.default_model);
    }
  }

  /** Open the settings screen (at the section with id `section`, when given: "settings-agents"). */
  async openSettings(section = "") {
    const { ui, state, openModal, toast, openSession } = this.page;
    try {
      await openSettings(openModal, {
        status: state.status, models: state.models, section, openSession, closeModal: () => ui.modal.close(),
        onSaved: (settings) => this.applySettings(settings),
        onStreamCheck: (verdict) => showStreamVerdict(ui.streamWarning, verdict),
        onProvidersChanged: () => this.loadModels(),  // the admin added, edited or removed a provider
      });
    } catch (err) {
      toast(`Could not open the settings: ${err.message}`);
    }
  }
}
