// What a reply shows about its context: the `attachments` event (chips under the user's message),
// `rag_sources` (a Sources list under the reply), `notice` lines; and the same from saved metadata,
// so a reloaded reply looks like the live one. Mixed into ReplyView like agent_render.js.
// (notice lines are drawn by context_render.js's on_notice.)

import { showChips } from "./attachments.js";
import { el } from "./dom.js";

function sourcesBox(view) {
  if (!view.sourcesBox) {
    view.sourcesBox = el("details", "rag-sources region");
    view.sourcesBox.appendChild(el("summary"));
    view.sourcesBox.appendChild(el("ol", "rag-list"));
    view.body.after(view.sourcesBox);
  }
  return view.sourcesBox;
}

function renderSources(view, sources) {
  if (!Array.isArray(sources) || !sources.length) return;
  const box = sourcesBox(view);
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
  view.ctx.onGrow?.();
}

export const fileContextHandlers = {
  /** The turn's attachments as stored: they replace the upload chips under the user's message. */
  on_attachments(event) {
    const before = this.el.previousElementSibling;
    if (before && before.classList.contains("user")) showChips(before, event.data);
  },

  on_rag_sources(event) {
    renderSources(this, event.data);
  },

  /** The same parts from a saved reply's metadata. */
  restoreFileContext(meta) {
    for (const message of meta.context_notices || []) this.on_notice({ message });
    renderSources(this, meta.rag_sources);
  },
};
