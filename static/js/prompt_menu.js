// The composer's `/` menu: typing `/` at the start of the message box lists the user's saved prompts
// (GET /api/prompts) as a listbox under the box's control (aria-activedescendant), filtered by what
// follows the slash. ArrowDown/ArrowUp move, Enter or Tab insert the highlighted prompt, Escape closes
// the menu. A prompt with {{variables}} first asks for each one in a small form (in the page's
// dialog); the filled-in text then replaces the `/command` typed. Prompts are made in Settings → Prompts.

import { api } from "./api.js";
import { el } from "./dom.js";

/** `{{name}}` as the server reads it (odysseus/store/prompts.py, VARIABLE). */
const VARIABLE = /\{\{\s*([A-Za-z_][A-Za-z0-9_-]{0,39})\s*\}\}/g;
/** The text before the caret while it is a command being typed: `/` then no space and no further `/`. */
const TYPING = /^\/([^\s/]{0,40})$/;

/**
 * @typedef {{id: string, title: string, command: string, content: string, variables?: string[]}} Prompt
 */

/** The distinct `{{variables}}` of a prompt's content, in order. */
export function promptVariables(content) {
  return [...new Set([...content.matchAll(VARIABLE)].map((match) => match[1]))];
}

/** The content with every `{{name}}` replaced by its value (names without a value stay as written). */
export function fillPrompt(content, values) {
  return content.replace(VARIABLE, (whole, name) => (Object.hasOwn(values, name) ? values[name] : whole));
}

export class PromptMenu {
  /**
   * @param {{input: HTMLTextAreaElement, list: HTMLElement, openModal: (title: string, node: Node) => void,
   *          modal: HTMLDialogElement, toast: (text: string) => void}} options
   */
  constructor({ input, list, openModal, modal, toast }) {
    this.input = input;
    this.list = list;
    this.openModal = openModal;
    this.modal = modal;
    this.toast = toast;
    /** @type {Prompt[] | null} the user's prompts while the menu is open (refreshed each time it opens) */
    this.prompts = null;
    /** @type {Prompt[] | null} the list last fetched: a reopened menu shows it at once, so a fast
     * `/sum` Enter inserts the prompt instead of sending the text while the refresh is in flight */
    this.known = null;
    /** @type {Prompt[]} */
    this.shown = [];
    this.active = -1;
    this.dismissed = null; // the text Escape closed the menu on: it stays closed until the text changes
    this.loading = null;
    list.setAttribute("role", "listbox");
    list.setAttribute("aria-label", "Saved prompts");
    list.hidden = true;
    input.setAttribute("aria-autocomplete", "list");
    input.setAttribute("aria-controls", list.id);
    input.addEventListener("input", () => this.update());
    input.addEventListener("click", () => this.update());
    input.addEventListener("blur", () => setTimeout(() => { if (document.activeElement !== input) this.close(); }, 150));
    list.addEventListener("mousedown", (event) => event.preventDefault()); // keep the focus in the box
  }

  /** The command being typed (the text after `/` up to the caret), or null when none is. */
  query() {
    const before = this.input.value.slice(0, this.input.selectionStart ?? 0);
    const match = TYPING.exec(before);
    return match ? match[1].toLowerCase() : null;
  }

  /** Open, filter or close the menu for what the box holds now. */
  async update() {
    const query = this.query();
    if (query === null) {
      this.dismissed = null;
      this.close();
      return;
    }
    if (this.dismissed === this.input.value) return;
    this.dismissed = null;
    if (this.prompts === null) {
      if (this.known === null) {
        await this.refresh();
        if (this.query() === null || this.isOpen()) return; // typed on meanwhile, or drawn by then
      } else {
        this.refresh(); // opening again: the list known so far now, the fresh one when it arrives
      }
      this.prompts = this.known ?? [];
    }
    this.render(this.query() ?? "");
  }

  /**
   * Fetch the user's prompts (one request at a time) into `known`. When the menu is open by the
   * time they arrive, redraw it with them, keeping the highlighted command where it is still listed.
   */
  async refresh() {
    this.loading ??= api("GET", "/api/prompts").then((data) => data.prompts).catch((err) => {
      this.toast(`Could not load your prompts: ${err.message}`);
      return null;
    });
    const loading = this.loading;
    const prompts = await loading;
    if (this.loading === loading) this.loading = null;
    if (prompts === null) return; // kept: the list known before, if any
    this.known = prompts;
    if (this.isOpen() && this.query() !== null) {
      const highlighted = this.shown[this.active]?.command;
      this.prompts = prompts;
      this.render(this.query() ?? "", highlighted);
    }
  }

  /**
   * Draw the prompts matching `query`: commands starting with it first, then those containing it.
   * @param {string} query
   * @param {string} [highlighted] the command to keep highlighted when it is listed (else the first is)
   */
  render(query, highlighted) {
    const prompts = this.prompts || [];
    const starts = prompts.filter((p) => p.command.startsWith(query));
    const contains = prompts.filter((p) => !p.command.startsWith(query)
      && (p.command.includes(query) || p.title.toLowerCase().includes(query)));
    this.shown = [...starts, ...contains];
    this.list.textContent = "";
    this.shown.forEach((prompt, index) => {
      const option = el("li", "prompt-option");
      option.id = `${this.list.id}-option-${index}`;
      option.setAttribute("role", "option");
      option.dataset.command = prompt.command;
      option.append(el("code", "prompt-command", `/${prompt.command}`), el("span", "prompt-title", prompt.title));
      option.addEventListener("click", () => this.choose(index));
      this.list.appendChild(option);
    });
    if (!this.shown.length) {
      const empty = el("li", "prompt-empty muted", prompts.length
        ? `No saved prompt matches /${query}.` : "No saved prompts yet: add them in Settings → Prompts.");
      empty.setAttribute("aria-disabled", "true");
      this.list.appendChild(empty);
    }
    this.list.hidden = false;
    this.input.setAttribute("aria-expanded", "true");
    const kept = this.shown.findIndex((prompt) => prompt.command === highlighted);
    this.highlight(kept >= 0 ? kept : this.shown.length ? 0 : -1);
  }

  /** Mark option `index` as the one Enter or Tab inserts. */
  highlight(index) {
    this.active = index;
    this.list.querySelectorAll('[role="option"]').forEach((option, i) => {
      option.setAttribute("aria-selected", i === index ? "true" : "false");
    });
    const option = index >= 0 ? this.list.querySelector(`#${CSS.escape(this.list.id)}-option-${index}`) : null;
    if (option) {
      this.input.setAttribute("aria-activedescendant", option.id);
      option.scrollIntoView({ block: "nearest" });
    } else {
      this.input.removeAttribute("aria-activedescendant");
    }
  }

  isOpen() {
    return !this.list.hidden;
  }

  close() {
    this.list.hidden = true;
    this.list.textContent = "";
    this.shown = [];
    this.active = -1;
    this.prompts = null;
    this.input.setAttribute("aria-expanded", "false");
    this.input.removeAttribute("aria-activedescendant");
  }

  /**
   * The composer's keys while the menu is open; true when the menu used the key (the composer then
   * ignores it: Enter inserts a prompt instead of sending).
   * @param {KeyboardEvent} event
   */
  handleKey(event) {
    if (!this.isOpen() || event.isComposing || event.altKey || event.ctrlKey || event.metaKey) return false;
    const count = this.shown.length;
    if (event.key === "Escape") {
      this.dismissed = this.input.value;
      this.close();
    } else if (event.key === "ArrowDown" && count) {
      this.highlight((this.active + 1) % count);
    } else if (event.key === "ArrowUp" && count) {
      this.highlight((this.active - 1 + count) % count);
    } else if ((event.key === "Enter" || event.key === "Tab") && !event.shiftKey && this.active >= 0) {
      this.choose(this.active);
    } else {
      return false;
    }
    event.preventDefault();
    event.stopPropagation(); // Escape here closes the menu, it does not stop a running reply
    return true;
  }

  /** Insert prompt `index` (asking for its variables first, if it has any). */
  choose(index) {
    const prompt = this.shown[index];
    if (!prompt) return;
    const end = this.input.selectionStart ?? 0; // the `/command` typed ends at the caret
    this.close();
    const names = prompt.variables || promptVariables(prompt.content);
    if (!names.length) this.insert(prompt.content, end);
    else this.askVariables(prompt, names, end);
  }

  /** The small form asking for each variable; its Insert puts the filled-in prompt into the box. */
  askVariables(prompt, names, end) {
    const form = el("form", "prompt-variables");
    const inputs = names.map((name) => {
      const label = el("label", null, name);
      const field = el("input");
      field.type = "text";
      field.name = name;
      field.autocomplete = "off";
      label.appendChild(field);
      form.appendChild(label);
      return field;
    });
    const submit = el("button", "primary", "Insert");
    submit.type = "submit";
    form.append(el("p", "muted", prompt.title), submit);
    let inserted = false;
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      inserted = true;
      const values = Object.fromEntries(inputs.map((field) => [field.name, field.value]));
      this.modal.close();
      this.insert(fillPrompt(prompt.content, values), end);
    });
    this.openModal(`Fill in /${prompt.command}`, form);
    this.modal.addEventListener("close", () => { if (!inserted) this.input.focus(); }, { once: true });
    inputs[0].focus();
  }

  /** Replace the typed `/command` (the box's start up to `end`) with `text`; the caret goes after it. */
  insert(text, end) {
    const rest = this.input.value.slice(end);
    this.input.value = text + rest;
    this.input.focus();
    this.input.setSelectionRange(text.length, text.length);
    this.dismissed = this.input.value; // inserted text starting with `/` does not open the menu again
    this.input.dispatchEvent(new Event("input", { bubbles: true })); // the composer resizes and counts
  }
}
