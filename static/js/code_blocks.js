// What a reply's fenced code blocks become besides highlighted code: ```mermaid draws a diagram
// (mermaid loaded on first use, strict security level, its SVG sanitised; the code stays when it
// cannot be parsed), and ```html / ```svg get a Preview that renders them in a sandboxed iframe.
//
// The preview's iframe has `sandbox="allow-scripts"` and never `allow-same-origin`: its document
// has an opaque origin, so whatever the model wrote cannot read the page's cookies or storage, nor
// call the API as the user. A diagram is drawn once its fence is closed (a reply still streaming
// re-renders its markdown every frame); drawings are kept by source, so re-renders reuse them.

import { renderMermaid } from "./exhibits.js";

/** @type {Map<string, HTMLElement>} diagram source -> its drawn figure (reused across re-renders) */
const drawn = new Map();
const DRAWN_MAX = 50;

/**
 * Upgrade the code blocks of a freshly rendered markdown element.
 * @param {HTMLElement} root the element setMarkdown filled
 * @param {string} text the markdown it was rendered from
 */
export function upgradeCodeBlocks(root, text) {
  for (const code of root.querySelectorAll("pre > code")) {
    const language = languageOf(code);
    const pre = /** @type {HTMLElement} */ (code.parentElement);
    if (language === "mermaid") diagram(pre, code.textContent || "", text);
    else if (language === "html" || language === "svg") previewButton(pre, code.textContent || "", language);
  }
}

/** @param {Element} code */
function languageOf(code) {
  const match = /(?:^|\s)language-([\w-]+)/.exec(code.className);
  return match ? match[1].toLowerCase() : "";
}

/**
 * Replace a closed ```mermaid block with its diagram.
 * @param {HTMLElement} pre
 * @param {string} source
 * @param {string} text
 */
function diagram(pre, source, text) {
  const body = source.replace(/\n$/, "");
  if (!body.trim() || !closed(text, body)) return; // still streaming: stays code for now
  let figure = drawn.get(body);
  if (!figure) {
    figure = renderMermaid({ content: body });
    figure.classList.add("reply-diagram");
    drawn.set(body, figure);
    if (drawn.size > DRAWN_MAX) drawn.delete(drawn.keys().next().value ?? "");
  }
  pre.replaceWith(figure.isConnected ? figure.cloneNode(true) : figure);
}

/**
 * Whether the markdown holds the fence of `body` closed.
 * @param {string} text
 * @param {string} body
 */
function closed(text, body) {
  const start = text.indexOf(body);
  if (start < 0) return false;
  return /^\s*\n?\s*(```|~~~)/.test(text.slice(start + body.length));
}

/**
 * A Preview button under an html or svg block: the markup, in a sandboxed iframe.
 * @param {HTMLElement} pre
 * @param {string} source
 * @param {string} language
 */
function previewButton(pre, source, language) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "preview-code";
  button.textContent = "Preview";
  button.setAttribute("aria-label", `Preview this ${language.toUpperCase()}`);
  const actions = document.createElement("div"); // under the block, not in it: a long line scrolls the block
  actions.className = "code-actions";
  actions.append(button);
  button.addEventListener("click", () => {
    const next = actions.nextElementSibling;
    if (next && next.classList.contains("code-preview")) {
      next.remove();
      button.textContent = "Preview";
      return;
    }
    const frame = document.createElement("iframe");
    frame.className = "code-preview";
    frame.setAttribute("sandbox", "allow-scripts"); // never allow-same-origin: an opaque origin
    frame.setAttribute("referrerpolicy", "no-referrer");
    frame.title = `${language.toUpperCase()} preview`;
    frame.srcdoc = language === "svg" ? `<!doctype html><body style="margin:0">${source}</body>` : source;
    actions.after(frame);
    button.textContent = "Hide preview";
  });
  pre.after(actions);
}
