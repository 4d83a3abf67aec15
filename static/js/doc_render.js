// A reply's handlers for document events: a chip per document the reply wrote or suggested changes
// to, with a button that opens it in the panel (documents.js). The live events and the saved
// metadata.documents build the same chips, so a reply looks the same after a reload. One DocPart per
// ReplyView (its `docs`); the panel itself follows the stream through ctx.documents.observe().

import { button, el } from "./dom.js";

function chipText(info) {
  if (info.action === "suggest") {
    const count = Array.isArray(info.suggestions) ? info.suggestions.length : 0;
    return `Suggested ${count} change${count === 1 ? "" : "s"} to the document`;
  }
  const title = info.title ? `“${info.title}”` : "the document";
  return info.action === "create" ? `Created ${title} (v${info.version})` : `Updated ${title} to v${info.version}`;
}

/** The documents part of a reply: one chip per document it wrote or suggested changes to. */
export class DocPart {
  /** @param {import("./render.js").ReplyView} view the reply this part draws into */
  constructor(view) {
    this.view = view;
    /** @type {HTMLElement | null} */
    this.docsBox = null;
  }

  /** One chip: what happened to which document, and a button to show it. */
  docChip(info) {
    if (!this.docsBox) {
      this.docsBox = el("div", "doc-chips region");
      this.view.body.before(this.docsBox);
    }
    const chip = el("div", `doc-chip ${info.action}`);
    chip.dataset.docId = String(info.doc_id || "");
    if (info.version != null) chip.dataset.version = String(info.version);
    chip.appendChild(el("span", "doc-chip-text", chipText(info)));
    const docs = this.view.ctx.documents;
    if (docs && info.action === "suggest") {
      chip.appendChild(button("Review", "doc-chip-open",
                              () => docs.on_doc_suggestions({ doc_id: info.doc_id, suggestions: info.suggestions })));
    } else if (docs) {
      chip.appendChild(button("Open", "doc-chip-open", () => docs.openById(info.doc_id)));
    }
    this.docsBox.appendChild(chip);
    this.view.ctx.onGrow?.();
  }

  on_doc_update(event) {
    this.docChip({ doc_id: event.doc_id, version: event.version, title: event.title,
                   action: event.version === 1 ? "create" : "update" });
  }

  on_doc_suggestions(event) {
    this.docChip({ doc_id: event.doc_id, action: "suggest", suggestions: event.suggestions });
  }

  /** The chips of a saved reply, from metadata.documents. */
  restoreDocs(meta) {
    for (const info of Array.isArray(meta.documents) ? meta.documents : []) this.docChip(info);
  }
}
