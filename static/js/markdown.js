// Markdown to safe HTML. Model output is untrusted: it is ALWAYS sanitised by DOMPurify before it
// touches innerHTML; when the sanitiser did not load, text is escaped instead (never raw HTML).
// LaTeX is lifted out before markdown and rendered with KaTeX (math.js).

import { upgradeCodeBlocks } from "./code_blocks.js";
import { extractMath, restoreMath } from "./math.js";

let hooked = false;
let markedReady = false;

/** Escape text for use inside HTML. */
export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

/** True for an http(s) URL or a same-origin path: the only links and images we render. */
export function safeUrl(url, { allowDataImage = false } = {}) {
  if (typeof url !== "string" || !url.trim()) return null;
  try {
    const parsed = new URL(url, location.href);
    if (parsed.protocol === "http:" || parsed.protocol === "https:") return parsed.href;
    if (allowDataImage && parsed.protocol === "data:" && /^data:image\/(png|jpeg|gif|webp);/i.test(url)) return url;
  } catch (err) {
    return null;
  }
  return null;
}

function purifier() {
  const purify = window.DOMPurify;
  if (!purify || typeof purify.sanitize !== "function") return null;
  if (!hooked) {
    hooked = true;
    purify.addHook("afterSanitizeAttributes", (node) => {
      if (node.tagName === "A" && node.getAttribute("href")) {
        node.setAttribute("target", "_blank");
        node.setAttribute("rel", "noopener noreferrer");
      }
    });
  }
  return purify;
}

/** Sanitise an HTML string (returns escaped text of it when the sanitiser is missing). */
export function sanitize(html) {
  const purify = purifier();
  if (!purify) return escapeHtml(html);
  return purify.sanitize(html, { USE_PROFILES: { html: true }, FORBID_TAGS: ["style", "form", "input"] });
}

/** Markdown text -> sanitised HTML (escaped plain text when a library failed to load). */
export function renderMarkdown(text) {
  const purify = purifier();
  const md = window.marked;
  if (!purify || !md || typeof md.parse !== "function") {
    return `<p class="plain">${escapeHtml(text)}</p>`;
  }
  if (!markedReady) {
    markedReady = true;
    // Raw HTML in model output is shown as text, like the chat UIs users know; the sanitiser
    // below still runs on everything, so a renderer bug cannot reopen the door.
    md.use({ renderer: { html: (token) => escapeHtml(typeof token === "string" ? token : token.text || token.raw || "") } });
  }
  const extracted = extractMath(text);
  const html = restoreMath(md.parse(extracted.text, { gfm: true, breaks: false, async: false }), extracted, escapeHtml);
  return purify.sanitize(html, { USE_PROFILES: { html: true }, FORBID_TAGS: ["style", "form", "input"] });
}

/** Render markdown into `el`, highlight its code blocks and give them copy buttons. */
export function setMarkdown(el, text) {
  el.innerHTML = renderMarkdown(text);
  for (const code of el.querySelectorAll("pre > code")) {
    if (window.hljs && typeof window.hljs.highlightElement === "function") {
      try {
        window.hljs.highlightElement(code);
      } catch (err) {
        /* an unknown language stays plain */
      }
    }
    const pre = code.parentElement;
    const copy = document.createElement("button");
    copy.type = "button";
    copy.className = "copy-code";
    copy.textContent = "Copy";
    copy.setAttribute("aria-label", "Copy code");
    copy.addEventListener("click", () => {
      navigator.clipboard?.writeText(code.textContent).then(() => { copy.textContent = "Copied"; }, () => {});
    });
    pre.prepend(copy);
  }
  upgradeCodeBlocks(el, text); // ```mermaid diagrams, ```html / ```svg previews (code_blocks.js)
}
