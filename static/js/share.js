// The shared chat page (GET /s/<token>, templates/share.html): a read-only snapshot. The server writes
// every message as escaped text; this draws the replies with the chat page's own renderer (markdown.js:
// sanitised by DOMPurify, raw HTML shown as text; exhibits.js for exhibit cards), as the chat shows them.
// User messages stay plain text, as in the chat. Choice buttons are disabled: nothing can be sent here.

import { el } from "./dom.js";
import { renderExhibit } from "./exhibits.js";
import { setMarkdown } from "./markdown.js";

/** A table's "Expand": the table in a dialog of its own (this page has no other). */
function openModal(title, node) {
  const dialog = /** @type {HTMLDialogElement} */ (el("dialog", "modal"));
  const head = el("header");
  head.appendChild(el("h2", "modal-title", title));
  const close = el("button", "modal-close icon", "✕");
  close.setAttribute("aria-label", "Close");
  close.addEventListener("click", () => dialog.close());
  head.appendChild(close);
  const body = el("div", "modal-body");
  body.appendChild(node);
  dialog.append(head, body);
  dialog.addEventListener("close", () => dialog.remove());
  document.body.appendChild(dialog);
  dialog.showModal();
}

const ctx = { onChoice: () => false, openModal };

function exhibitsOf() {
  try {
    const data = JSON.parse(document.getElementById("share-exhibits")?.textContent || "[]");
    return Array.isArray(data) ? data : [];
  } catch (err) {
    return [];
  }
}

function draw() {
  const exhibits = exhibitsOf();
  for (const article of /** @type {NodeListOf<HTMLElement>} */ (document.querySelectorAll("#share-messages .msg"))) {
    if (!article.classList.contains("assistant")) continue;
    const body = /** @type {HTMLElement} */ (article.querySelector(".share-source"));
    const text = body.textContent || "";
    const segment = el("div", "segment markdown");
    setMarkdown(segment, text);
    body.classList.remove("share-source");
    body.replaceChildren(segment);
    const cards = exhibits[Number(article.dataset.index)] || [];
    if (cards.length) {
      const box = el("div", "exhibits region");
      for (const exhibit of cards) box.appendChild(renderExhibit(exhibit, ctx));
      for (const option of /** @type {NodeListOf<HTMLButtonElement>} */ (box.querySelectorAll(".choice-option"))) {
        option.disabled = true;
        option.title = "A shared copy: nothing can be sent from here";
      }
      article.insertBefore(box, body);
    }
  }
  const when = /** @type {HTMLTimeElement | null} */ (document.getElementById("shared-at"));
  if (when) {
    const date = new Date(Number(when.getAttribute("datetime")) * 1000);
    when.dateTime = date.toISOString();
    when.textContent = `Shared ${date.toLocaleString()}.`;
  }
  document.body.dataset.ready = "true";
}

draw();
