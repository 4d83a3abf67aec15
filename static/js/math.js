// LaTeX in replies: $...$, $$...$$, \(...\) and \[...\] rendered with KaTeX (vendored). Math is
// lifted out of the markdown source before marked sees it (so markdown cannot eat its \ _ * ^), and
// code spans and fenced code blocks are skipped, so code is never touched. The rendered math goes
// back in before sanitising: KaTeX's HTML passes through DOMPurify like everything else. KaTeX is
// loaded on the first formula (lazy_assets.js); until it runs the formula shows as its source.

import { loadScript, loadStyle } from "./lazy_assets.js";

/** @type {Array<[string, string, boolean]>} */
const OPENERS = [["$$", "$$", true], ["\\[", "\\]", true], ["\\(", "\\)", false]];

function fenceAt(text, i) {
  // A fenced code block starts at a line start (up to three spaces) with ``` or ~~~.
  if (i !== 0 && text[i - 1] !== "\n") return null;
  const match = /^ {0,3}(`{3,}|~{3,})/.exec(text.slice(i, i + 64));
  return match ? match[1] : null;
}

function skipFence(text, i, fence) {
  const closer = new RegExp(`\\n {0,3}${fence[0] === "`" ? "`" : "~"}{${fence.length},}[ \\t]*(?=\\n|$)`, "g");
  closer.lastIndex = i + fence.length;
  const match = closer.exec(text);
  return match ? match.index + match[0].length : text.length;
}

function skipCodeSpan(text, i) {
  let run = 0;
  while (text[i + run] === "`") run++;
  const ticks = "`".repeat(run);
  let j = i + run;
  while (true) {
    const at = text.indexOf(ticks, j);
    if (at < 0) return i + run; // no closer: the backticks are literal
    let end = at + run;
    if (text[end] !== "`" && text[at - 1] !== "`") return end;
    while (text[end] === "`") end++;
    j = end;
  }
}

function inlineDollarEnd(text, i) {
  // $x$: no space after the opening $, none before the closing $, no digit right after it ("$5 and $6").
  if (text[i + 1] === undefined || /\s|\$/.test(text[i + 1])) return -1;
  for (let j = i + 1; j < text.length; j++) {
    const c = text[j];
    if (c === "\\") { j++; continue; }
    if (c === "\n" && text[j + 1] === "\n") return -1;
    if (c === "$") {
      if (/\s/.test(text[j - 1]) || /\d/.test(text[j + 1] || "")) return -1;
      return j;
    }
  }
  return -1;
}

/**
 * Split markdown source into text with placeholders and the math they stand for.
 * Returns {text, math: [{tex, display}], token(i)}.
 */
export function extractMath(source) {
  const nonce = Math.random().toString(36).slice(2, 10).replace(/\d/g, "x");
  const token = (n) => `ODYMATH${nonce}Q${n}Z`;
  const math = [];
  let out = "";
  let i = 0;
  while (i < source.length) {
    const c = source[i];
    const fence = (c === "`" || c === "~" || c === " ") ? fenceAt(source, i) : null;
    if (fence) {
      const end = skipFence(source, i, fence);
      out += source.slice(i, end);
      i = end;
      continue;
    }
    if (c === "`") {
      const end = skipCodeSpan(source, i);
      out += source.slice(i, end);
      i = end;
      continue;
    }
    if (c === "\\" && source[i + 1] === "$") {
      out += "\\$";
      i += 2;
      continue;
    }
    let matched = false;
    for (const [open, close, display] of OPENERS) {
      if (source.startsWith(open, i)) {
        const end = source.indexOf(close, i + open.length);
        const tex = end >= 0 ? source.slice(i + open.length, end) : "";
        if (end >= 0 && tex.trim()) {
          math.push({ tex, display });
          out += token(math.length - 1);
          i = end + close.length;
          matched = true;
        }
        break;
      }
    }
    if (matched) continue;
    if (c === "$" && source[i + 1] !== "$") {
      const end = inlineDollarEnd(source, i);
      if (end > 0) {
        math.push({ tex: source.slice(i + 1, end), display: false });
        out += token(math.length - 1);
        i = end + 1;
        continue;
      }
    }
    out += c;
    i += 1;
  }
  return { text: out, math, token };
}

/** @type {"idle" | "loading" | "failed"} */
let katexState = "idle";

/** Load KaTeX on first use (it is large and most replies have no math), then render waiting formulas. */
function loadKatex() {
  if (katexState !== "idle") return;
  katexState = "loading";
  Promise.all([loadScript("vendor/katex/katex.min.js"), loadStyle("vendor/katex/katex.min.css")]).then(() => {
    katexState = "idle";
    upgradePending();
  }, () => {
    katexState = "failed"; // formulas stay as their escaped source
  });
}

function escapeText(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c] || c));
}

/** Replace each formula shown as source while KaTeX loaded with its rendering (sanitised, as always). */
function upgradePending() {
  const purify = window.DOMPurify;
  if (!purify || typeof purify.sanitize !== "function") return;
  for (const node of document.querySelectorAll("span.math-pending")) {
    if (!(node instanceof HTMLElement)) continue;
    const html = renderOne({ tex: node.dataset.tex || "", display: node.dataset.display === "1" }, escapeText);
    node.outerHTML = purify.sanitize(html, { USE_PROFILES: { html: true }, FORBID_TAGS: ["style", "form", "input"] });
  }
}

/** KaTeX HTML for one formula (the source, escaped, when KaTeX is missing or the TeX is invalid). */
function renderOne(item, escapeHtml) {
  const katex = window.katex;
  if (!katex || typeof katex.renderToString !== "function") {
    const source = escapeHtml(item.display ? `$$${item.tex}$$` : `$${item.tex}$`);
    if (katexState === "failed") return source;
    loadKatex();
    return `<span class="math-pending" data-tex="${escapeHtml(item.tex)}" data-display="${item.display ? 1 : 0}">${source}</span>`;
  }
  try {
    return katex.renderToString(item.tex, { displayMode: item.display, throwOnError: false, output: "html", trust: false,
                                            strict: "ignore", maxSize: 50, maxExpand: 1000 });
  } catch (err) {
    return `<code class="math-error">${escapeHtml(item.tex)}</code>`;
  }
}

/** Put rendered math back in place of the placeholders in `html`. */
export function restoreMath(html, extracted, escapeHtml) {
  if (!extracted.math.length) return html;
  return html.replace(new RegExp(extracted.token("(\\d+)"), "g"), (_, n) => {
    const item = extracted.math[Number(n)];
    return item ? renderOne(item, escapeHtml) : "";
  });
}
