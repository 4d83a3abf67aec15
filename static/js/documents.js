// The document panel beside the chat: one editor document at a time, written by the user or by the
// assistant's document tools. It follows the stream's document events (docs/protocol.md):
//
// - doc_stream_open / doc_stream_delta: a live preview. A new document previews in the editor
//   (read-only while it streams); a rewrite of the open document previews in the review box, so
//   what the user sees is never replaced before they accept it;
// - doc_update: a new document opens at once; a change to the open one shows a diff with Accept
//   (show it) and Reject (save the shown text back as a new version);
// - doc_suggestions: cards one at a time: Accept (applied and saved with PUT), Reject, Accept all.
// The editor is CodeJar with highlight.js colouring and a line-number gutter; Save sends PUT; the
// version list restores any version. An open document is sent as active_doc_id with the next turn.

import { api } from "./api.js";
import { button, el } from "./dom.js";

const HLJS_NAMES = { bash: "bash", c: "c", cpp: "cpp", css: "css", go: "go", html: "xml", java: "java",
  javascript: "javascript", json: "json", markdown: "markdown", python: "python", rust: "rust", sql: "sql",
  toml: "ini", typescript: "typescript", xml: "xml", yaml: "yaml" };
const DOC_TOOLS = new Set(["create_document", "update_document"]);
const ENDINGS = new Set(["chat_terminal", "agent_terminal", "done", "error"]);

let codeJarModule = null; // loaded once; without it the editor is a plain contenteditable
async function loadCodeJar() {
  if (codeJarModule === null) codeJarModule = await import("../vendor/codejar.js").catch(() => false);
  return codeJarModule || null;
}

/** Colour `node`'s text as `language` with highlight.js (escaped HTML), or leave it plain. */
function highlightInto(node, text, language) {
  const name = HLJS_NAMES[language];
  const hljs = window.hljs;
  if (name && hljs && typeof hljs.highlight === "function" && hljs.getLanguage?.(name)) {
    try {
      node.innerHTML = hljs.highlight(text, { language: name, ignoreIllegals: true }).value;
      return;
    } catch (err) {
      /* fall back to plain text */
    }
  }
  node.textContent = text;
}

function lineCount(text) {
  return text ? text.split("\n").length : 1;
}

/** The first occurrence of `find` replaced, or null when it no longer occurs. */
function applyOnce(text, find, replace) {
  const at = text.indexOf(find);
  return at < 0 ? null : text.slice(0, at) + replace + text.slice(at + find.length);
}

/** A diff of `before` -> `after` as spans (jsdiff when loaded, else old and new blocks). */
export function diffNodes(before, after, byWords = false) {
  const box = el("pre", "doc-diff");
  const Diff = window.Diff;
  if (!Diff) {
    box.append(el("del", null, before), el("ins", null, after));
    return box;
  }
  const parts = byWords ? Diff.diffWordsWithSpace(before, after) : Diff.diffLines(before, after);
  for (const part of parts) box.appendChild(el(part.added ? "ins" : part.removed ? "del" : "span", null, part.value));
  return box;
}

export class DocumentPanel {
  /** @param {HTMLElement} root @param {{toast?: (text: string) => void}} [options] */
  constructor(root, { toast = () => {} } = {}) {
    this.root = root;
    this.toast = toast;
    this.doc = null; // {id, title, language, version, content}: the server's state as last seen
    this.shown = ""; // the text in the editor
    this.preview = null; // {title, language, content, target: "editor"|"review"}
    this.pending = null; // an AI doc_update of the open document awaiting accept/reject
    this.cards = []; // suggestions still to decide
    this.build();
  }

  build() {
    const r = this.root;
    r.textContent = "";
    this.title = el("h2", "doc-title", "Document");
    this.meta = el("span", "doc-meta");
    this.saveButton = button("Save", "doc-save", () => this.save());
    this.versionsButton = button("Versions", "doc-versions-toggle", () => this.toggleVersions());
    const close = button("✕", "doc-close icon", () => this.close(), "Close the document");
    const head = el("header", "doc-head");
    head.append(this.title, this.meta, this.saveButton, this.versionsButton, close);
    this.status = el("div", "doc-status");
    this.status.setAttribute("role", "status");
    this.review = el("section", "doc-review");
    this.review.hidden = true;
    this.suggestion = el("section", "doc-suggestion");
    this.suggestion.hidden = true;
    this.versions = el("section", "doc-versions");
    this.versions.hidden = true;
    const wrap = el("div", "doc-editor-wrap");
    this.gutter = el("div", "doc-lines");
    this.gutter.setAttribute("aria-hidden", "true");
    this.editor = el("div", "doc-editor hljs");
    this.editor.setAttribute("aria-label", "Document text");
    this.editor.setAttribute("role", "textbox");
    this.editor.setAttribute("aria-multiline", "true");
    this.editable = "true"; // CodeJar, once loaded, chooses its own ("plaintext-only" where supported)
    this.editor.setAttribute("contenteditable", this.editable);
    this.editor.addEventListener("input", () => this.edited(this.editor.textContent));
    wrap.append(this.gutter, this.editor);
    r.append(head, this.status, this.review, this.suggestion, this.versions, wrap);
    loadCodeJar().then((mod) => {
      if (!mod) return;
      this.jar = mod.CodeJar(this.editor, (node) => highlightInto(node, node.textContent, this.language()),
                             { tab: "  ", addClosing: false });
      this.editable = this.editor.getAttribute("contenteditable") || "true";
      this.jar.onUpdate((text) => this.edited(text));
      this.setEditor(this.shown);
    });
    this.refreshButtons();
  }

  language() {
    return (this.preview && this.preview.target === "editor" ? this.preview.language : this.doc?.language) || "text";
  }

  // ---- showing ------------------------------------------------------------------------------

  /** Show the panel with `doc` ({id, title, language, version, content}) in the editor. */
  open(doc) {
    this.doc = { id: doc.id ?? doc.doc_id, title: doc.title, language: doc.language, version: doc.version,
                 content: doc.content };
    this.preview = null;
    this.pending = null;
    this.review.hidden = true;
    this.setEditor(doc.content);
    this.setStatus("");
    this.show();
    if (!this.versions.hidden) this.loadVersions(); // an open version list follows the document
  }

  show() {
    this.root.hidden = false;
    document.getElementById("app")?.classList.add("doc-open");
    this.renderHead();
  }

  /** Hide the panel: the document is no longer sent with the next turn. */
  close() {
    this.root.hidden = true;
    document.getElementById("app")?.classList.remove("doc-open");
  }

  /** Forget everything (a new chat). */
  reset() {
    this.doc = null;
    this.preview = null;
    this.pending = null;
    this.cards = [];
    this.suggestion.hidden = true;
    this.review.hidden = true;
    this.versions.hidden = true;
    this.setEditor("");
    this.close();
  }

  /** The id to send as active_doc_id: the open document, if the panel is showing one. */
  activeDocId() {
    return !this.root.hidden && this.doc && this.doc.id ? this.doc.id : null;
  }

  /** After opening a session: show its active document, if it has one. */
  async loadSession(sessionId) {
    this.reset();
    if (!sessionId) return;
    try {
      const data = await api("GET", `/api/documents/${encodeURIComponent(sessionId)}`);
      const active = data.documents.find((d) => d.active);
      if (active) this.open(await api("GET", `/api/document/${encodeURIComponent(active.id)}`));
    } catch (err) {
      /* no documents panel for this session */
    }
  }

  /** Open a document by id (a reply's document chip). */
  async openById(id) {
    try {
      this.open(await api("GET", `/api/document/${encodeURIComponent(id)}`));
    } catch (err) {
      this.toast(`Could not open the document: ${err.message}`);
    }
  }

  renderHead() {
    const source = this.preview && this.preview.target === "editor" ? this.preview : this.doc;
    this.title.textContent = source?.title || "Document";
    const version = this.doc && source === this.doc && this.doc.version ? ` · v${this.doc.version}` : "";
    this.meta.textContent = source ? `${source.language || "text"}${version}` : "";
    this.refreshButtons();
  }

  refreshButtons() {
    const busy = !!(this.preview && this.preview.target === "editor");
    this.saveButton.disabled = busy || !this.doc || this.shown === this.doc.content;
    this.versionsButton.disabled = busy || !this.doc;
    this.editor.setAttribute("contenteditable", busy || this.pending ? "false" : this.editable);
    this.root.dataset.state = busy ? "preview" : this.pending ? "review" : this.cards.length ? "suggesting" : "editing";
  }

  setStatus(text) {
    this.status.textContent = text || "";
  }

  /** Put `text` in the editor (highlighted) and renumber the gutter. */
  setEditor(text) {
    this.shown = text || "";
    if (this.jar) this.jar.updateCode(this.shown, false);
    else highlightInto(this.editor, this.shown, this.language());
    this.numberLines(this.shown);
    this.refreshButtons();
  }

  numberLines(text) {
    const count = lineCount(text);
    if (this.lines === count) return;
    this.lines = count;
    this.gutter.textContent = Array.from({ length: count }, (_, i) => i + 1).join("\n");
  }

  edited(text) {
    if (this.preview?.target === "editor") return;
    this.shown = text;
    this.numberLines(text);
    this.refreshButtons();
  }

  // ---- stream events (called for every event of the turn) ----------------------------------

  /** Follow one stream event; only document events and the turn's end matter here. */
  observe(event) {
    const handler = this[`on_${event.type}`];
    if (typeof handler === "function") handler.call(this, event);
    else if (event.type === "tool_output" && DOC_TOOLS.has(event.tool) && event.exit_code) this.dropPreview();
    else if (ENDINGS.has(event.type)) this.dropPreview();
  }

  on_doc_stream_open(event) {
    const rewrite = !this.root.hidden && this.doc && event.title === this.doc.title;
    this.preview = { title: event.title, language: event.language, content: "", target: rewrite ? "review" : "editor" };
    if (rewrite) {
      this.review.textContent = "";
      this.review.append(el("h3", null, "The assistant is rewriting this document…"), el("pre", "doc-preview"));
      this.review.hidden = false;
    } else {
      this.setEditor("");
    }
    this.setStatus("The assistant is writing…");
    this.show();
  }

  on_doc_stream_delta(event) {
    if (!this.preview) return;
    this.preview.content = event.content;
    if (this.previewFrame) return;
    this.previewFrame = requestAnimationFrame(() => {
      this.previewFrame = null;
      if (!this.preview) return;
      if (this.preview.target === "editor") {
        highlightInto(this.editor, this.preview.content, this.preview.language);
        this.numberLines(this.preview.content);
      } else {
        this.review.querySelector(".doc-preview").textContent = this.preview.content;
      }
    });
  }

  /** A previewed call was refused, or the turn ended without settling it: back to the document. */
  dropPreview() {
    if (!this.preview) return;
    const target = this.preview.target;
    this.preview = null;
    if (target === "review") this.review.hidden = true;
    else if (this.doc) this.setEditor(this.shown);
    else this.close();
    this.setStatus("");
    this.renderHead();
  }

  on_doc_update(event) {
    const wasPreview = this.preview;
    this.preview = null;
    const same = this.doc && this.doc.id === event.doc_id && !this.root.hidden;
    if (!same || event.content === this.shown) {
      if (wasPreview?.target === "review") this.review.hidden = true;
      this.open(event);
      this.setStatus(same ? "" : `The assistant ${event.version === 1 ? "created" : "updated"} this document.`);
      return;
    }
    this.pending = event;
    this.review.textContent = "";
    const accept = button("Accept", "doc-accept", () => this.acceptPending());
    const reject = button("Reject", "doc-reject", () => this.rejectPending());
    const actions = el("div", "doc-actions");
    actions.append(accept, reject);
    this.review.append(el("h3", null, `The assistant changed this document (v${event.version})`),
                       diffNodes(this.shown, event.content), actions);
    this.review.hidden = false;
    this.setStatus("Review the assistant's change.");
    this.show();
  }

  acceptPending() {
    const event = this.pending;
    if (!event) return;
    this.open(event);
    this.setStatus("Change accepted.");
  }

  async rejectPending() {
    const event = this.pending;
    if (!event) return;
    this.pending = null;
    this.review.hidden = true;
    this.doc = { ...this.doc, version: event.version, content: event.content, title: event.title };
    this.refreshButtons();
    await this.save("Rejected the assistant's change");
    this.setStatus("Change rejected; your text was kept.");
  }

  on_doc_suggestions(event) {
    const list = Array.isArray(event.suggestions) ? event.suggestions : [];
    if (!list.length) return;
    const showCards = () => {
      this.cards = list.map((s) => ({ ...s }));
      this.renderCard();
    };
    if (this.doc && this.doc.id === event.doc_id && !this.root.hidden) showCards();
    else this.openById(event.doc_id).then(showCards);
  }

  /** Show the first undecided suggestion as a card. */
  renderCard() {
    this.suggestion.textContent = "";
    const card = this.cards[0];
    this.refreshButtons();
    if (!card) {
      this.suggestion.hidden = true;
      return;
    }
    const box = el("article", "suggestion-card");
    box.dataset.suggestionId = card.id;
    box.append(el("h3", null, `Suggestion ${card.id.replace(/^sugg-/, "")} · ${this.cards.length} left`),
               el("p", "suggestion-reason", card.reason || ""), diffNodes(card.find, card.replace, true));
    const actions = el("div", "doc-actions");
    actions.append(button("Accept", "suggestion-accept", () => this.decide(false, true)),
                   button("Reject", "suggestion-reject", () => this.decide(false, false)),
                   button("Accept all", "suggestion-accept-all", () => this.decide(true, true)));
    box.appendChild(actions);
    this.suggestion.appendChild(box);
    this.suggestion.hidden = false;
  }

  async decide(all, accept) {
    const taken = all ? this.cards.splice(0) : [this.cards.shift()];
    if (accept) {
      let text = this.shown;
      const missed = [];
      for (const card of taken) {
        const next = applyOnce(text, card.find, card.replace);
        if (next === null) missed.push(card.id);
        else text = next;
      }
      if (text !== this.shown) {
        this.setEditor(text);
        await this.save(`Accepted ${taken.map((c) => c.id).join(", ")}`);
      }
      if (missed.length) this.toast(`No longer applies: ${missed.join(", ")}`);
    }
    this.renderCard();
  }

  // ---- user actions -------------------------------------------------------------------------

  /** PUT the editor's text; the server folds a quick second save into the first. */
  async save(summary) {
    if (!this.doc) return;
    const body = { content: this.shown };
    if (summary) body.summary = summary;
    try {
      const saved = await api("PUT", `/api/document/${encodeURIComponent(this.doc.id)}`, body);
      this.doc = { id: saved.id, title: saved.title, language: saved.language, version: saved.version,
                   content: saved.content };
      this.setStatus(saved.changed ? `Saved as v${saved.version}.` : "No changes to save.");
      this.renderHead();
      if (!this.versions.hidden) this.loadVersions();
    } catch (err) {
      this.toast(`Could not save the document: ${err.message}`);
    }
  }

  toggleVersions() {
    this.versions.hidden = !this.versions.hidden;
    if (!this.versions.hidden) this.loadVersions();
  }

  async loadVersions() {
    if (!this.doc) return;
    try {
      const data = await api("GET", `/api/document/${encodeURIComponent(this.doc.id)}/versions`);
      const list = el("ol", "version-list");
      for (const v of data.versions) {
        const item = el("li", `version ${v.source}`);
        item.dataset.version = String(v.version);
        const when = new Date(v.created_at * 1000).toLocaleTimeString();
        item.append(el("span", "version-label", `v${v.version} · ${v.source === "ai" ? "assistant" : "you"} · ${when}`),
                    el("span", "version-summary", v.summary || ""));
        if (v.version !== this.doc.version) item.appendChild(button("Restore", "version-restore", () => this.restore(v.version)));
        list.appendChild(item);
      }
      this.versions.textContent = "";
      this.versions.append(el("h3", null, "Versions"), list);
    } catch (err) {
      this.toast(`Could not list versions: ${err.message}`);
    }
  }

  async restore(number) {
    try {
      const doc = await api("POST", `/api/document/${encodeURIComponent(this.doc.id)}/restore/${number}`);
      this.open(doc);
      this.setStatus(`Restored v${number} as v${doc.version}.`);
    } catch (err) {
      this.toast(`Could not restore: ${err.message}`);
    }
  }
}
