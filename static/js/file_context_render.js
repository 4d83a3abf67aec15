// What a reply shows about its context: the `attachments` event (chips under the user's message),
// `rag_sources` (a Sources list under the reply), `notice` lines; and the same from saved metadata,
// so a reloaded reply looks like the live one. One FileContextPart per ReplyView (its `files`).
// (notice lines are drawn by context_render.js's on_notice.)

import { showChips } from "./attachments.js";
import { el } from "./dom.js";

/** The file-context part of a reply: attachment chips and retrieval sources. */
export class FileContextPart {
  /** @param {import("./render.js").ReplyView} view the reply this part draws into */
  constructor(view) {
    this.view = view;
    /** @type {HTMLElement | null} */
    this.sourcesBox = null;
  }

  /** The "Sources from your files" list under the reply's text, made on first use. */
  box() {
    if (!this.sourcesBox) {
      this.sourcesBox = el("details", "rag-sources region");
      this.sourcesBox.appendChild(el("summary"));
      this.sourcesBox.appendChild(el("ol", "rag-list"));
      this.view.body.after(this.sourcesBox);
    }
    return this.sourcesBox;
  }

  renderSources(sources) {
    if (!Array.isArray(sources) || !sources.length) return;
    const box = this.box();
    box.querySelector("summary").textContent = `Sources from your files (${sources.length})`;
    const list = box.querySelector(".rag-list");
    list.textContent = "";
    for (const source of sources) {
      const item = el("li", "rag-source");
      item.dataset.uploadId = source.upload_id || "";
      const head = el("div", "rag-head");
      head.append(el("span", "rag-file", source.filename || "file"),
                  el("span", "rag-part", `part ${Number(source.chunk ?? 0) + 1}`),
                  el("span", "rag-score", typeof source.score === "number" ? source.score.toFixed(2) : ""));
      item.append(head, el("div", "rag-snippet", source.snippet || ""));
      list.appendChild(item);
    }
    this.view.ctx.onGrow?.();
  }

  /** The turn's attachments as stored: they replace the upload chips under the user's message. */
  on_attachments(event) {
    const before = this.view.el.previousElementSibling;
    if (before && before.classList.contains("user")) showChips(before, event.data);
  }

  on_rag_sources(event) {
    this.renderSources(event.data);
  }

  /** The same parts from a saved reply's metadata. */
  restoreFileContext(meta) {
    for (const message of meta.context_notices || []) this.view.context.on_notice({ message });
    this.renderSources(meta.rag_sources);
  }
}
