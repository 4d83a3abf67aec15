// Exhibits: typed, agent-authored cards (schema_version 1, layout "stack") rendered from an
// element registry. Unknown element types fall back to their JSON source, so a newer server can
// add types without breaking this page. Everything is built with textContent or sanitised HTML.

import { el } from "./dom.js";
import { assetUrl } from "./lazy_assets.js";
import { safeUrl } from "./markdown.js";

let mermaidLoading = null;
let diagramCount = 0;

/** Load static/vendor/mermaid.min.js once, on first use (it is large). */
export function loadMermaid() {
  if (window.mermaid) return Promise.resolve(window.mermaid);
  if (!mermaidLoading) {
    mermaidLoading = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = assetUrl("vendor/mermaid.min.js"); // fingerprinted, cached for good
      script.onload = () => (window.mermaid ? resolve(window.mermaid) : reject(new Error("mermaid missing")));
      script.onerror = () => reject(new Error("mermaid failed to load"));
      document.head.appendChild(script);
    }).then((mermaid) => {
      const dark = document.documentElement.dataset.effectiveTheme === "dark";
      // Labels as SVG <text>, not HTML in <foreignObject> (which the SVG sanitiser removes): the
      // top-level htmlLabels is the switch that mermaid 11+ reads, flowchart.htmlLabels the older one.
      mermaid.initialize({ startOnLoad: false, securityLevel: "strict", theme: dark ? "dark" : "default",
                           htmlLabels: false, flowchart: { htmlLabels: false } });
      return mermaid;
    });
    mermaidLoading.catch(() => { mermaidLoading = null; });
  }
  return mermaidLoading;
}

function sourceBlock(text) {
  const pre = el("pre", "exhibit-source");
  pre.appendChild(el("code", null, text));
  return pre;
}

/** A mermaid diagram (drawn when mermaid has loaded; its source below, opened when it cannot be drawn). */
export function renderMermaid(element) {
  const box = el("figure", "exhibit-mermaid");
  if (element.title) box.appendChild(el("figcaption", null, element.title));
  const canvas = el("div", "mermaid-canvas", "Rendering diagram…");
  box.appendChild(canvas);
  const source = el("details", "mermaid-source");
  source.appendChild(el("summary", null, "Diagram source"));
  source.appendChild(sourceBlock(element.content || ""));
  box.appendChild(source);
  loadMermaid()
    .then((mermaid) => mermaid.render(`exhibit-diagram-${++diagramCount}`, String(element.content || "")))
    .then(({ svg }) => {
      const purify = window.DOMPurify;
      if (!purify) throw new Error("no sanitiser");
      canvas.innerHTML = purify.sanitize(svg, { USE_PROFILES: { svg: true, svgFilters: true } });
      canvas.dataset.rendered = "true";
    })
    .catch((err) => {
      canvas.textContent = `Diagram could not be drawn (${err && err.message ? err.message : err}); its source is below.`;
      canvas.dataset.rendered = "false";
      source.open = true;
    });
  return box;
}

function renderChoice(element, ctx) {
  const box = el("div", "exhibit-choice");
  if (element.prompt) box.appendChild(el("p", "choice-prompt", element.prompt));
  const row = el("div", "choice-options");
  for (const option of Array.isArray(element.options) ? element.options : []) {
    const label = typeof option === "string" ? option : option && (option.label || option.value);
    if (!label) continue;
    const button = el("button", "choice-option", label);
    button.type = "button";
    button.addEventListener("click", () => {
      if (ctx.onChoice(String(label)) === false) return; // not sent (a reply is still streaming)
      for (const other of row.querySelectorAll("button")) other.disabled = true;
      button.classList.add("chosen");
      button.setAttribute("aria-pressed", "true");
    });
    row.appendChild(button);
  }
  box.appendChild(row);
  return box;
}

function cellText(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

function compareCells(a, b) {
  const na = Number(String(a).replace(/[$,%\s]/g, ""));
  const nb = Number(String(b).replace(/[$,%\s]/g, ""));
  if (a !== "" && b !== "" && !Number.isNaN(na) && !Number.isNaN(nb)) return na - nb;
  return String(a).localeCompare(String(b), undefined, { numeric: true, sensitivity: "base" });
}

function buildTable(element) {
  const columns = (Array.isArray(element.columns) ? element.columns : []).map(cellText);
  const rows = (Array.isArray(element.rows) ? element.rows : []).map((row) =>
    (Array.isArray(row) ? row : columns.map((c) => (row || {})[c])).map(cellText));
  const table = el("table", "exhibit-table");
  if (element.caption) table.appendChild(el("caption", null, element.caption));
  const head = table.createTHead().insertRow();
  const body = table.createTBody();
  const state = { column: -1, dir: 1 };
  const fill = () => {
    body.textContent = "";
    const sorted = state.column < 0 ? rows : [...rows].sort((x, y) => state.dir * compareCells(x[state.column] ?? "", y[state.column] ?? ""));
    for (const row of sorted) {
      const tr = body.insertRow();
      columns.forEach((column, index) => {
        const td = tr.insertCell();
        td.dataset.label = column;
        td.textContent = row[index] ?? "";
      });
    }
  };
  columns.forEach((column, index) => {
    const th = el("th");
    th.scope = "col";
    th.setAttribute("aria-sort", "none");
    const button = el("button", "sort", column);
    button.type = "button";
    button.addEventListener("click", () => {
      state.dir = state.column === index ? -state.dir : 1;
      state.column = index;
      for (const other of head.querySelectorAll("th")) other.setAttribute("aria-sort", "none");
      th.setAttribute("aria-sort", state.dir > 0 ? "ascending" : "descending");
      fill();
    });
    th.appendChild(button);
    head.appendChild(th);
  });
  fill();
  return table;
}

function renderTable(element, ctx) {
  const box = el("div", "exhibit-table-box");
  const bar = el("div", "exhibit-table-bar");
  const expand = el("button", "expand-table", "Expand");
  expand.type = "button";
  expand.setAttribute("aria-label", "Expand table");
  expand.addEventListener("click", () => ctx.openModal(element.caption || "Table", buildTable(element)));
  bar.appendChild(expand);
  box.appendChild(bar);
  const scroller = el("div", "table-scroll");
  scroller.tabIndex = 0;
  scroller.appendChild(buildTable(element));
  box.appendChild(scroller);
  return box;
}

function sourceLink(source) {
  const url = safeUrl(source.url);
  const label = source.label || source.url || "source";
  if (!url) return el("span", "source-label", label);
  const link = el("a", "source-label", label);
  link.href = url;
  link.target = "_blank";
  link.rel = "noopener noreferrer";
  return link;
}

function renderCitation(element) {
  const box = el("section", "exhibit-citation");
  box.appendChild(el("h4", null, "Sources"));
  const sources = Array.isArray(element.sources) ? element.sources : [];
  const active = sources.filter((s) => s && s.kind === "active");
  const passive = sources.filter((s) => s && s.kind !== "active");
  for (const source of active) {
    const item = el("details", "source active");
    item.open = true;
    const summary = el("summary");
    summary.appendChild(sourceLink(source));
    if (source.source_type) summary.appendChild(el("span", "source-type", source.source_type));
    item.appendChild(summary);
    if (source.quote) item.appendChild(el("blockquote", null, source.quote));
    box.appendChild(item);
  }
  if (passive.length) {
    const list = el("ul", "sources passive");
    for (const source of passive) {
      const li = el("li");
      li.appendChild(sourceLink(source));
      if (source.source_type) li.appendChild(el("span", "source-type", source.source_type));
      list.appendChild(li);
    }
    if (active.length) {
      const more = el("details", "more-sources");
      more.appendChild(el("summary", null, `${passive.length} more source${passive.length > 1 ? "s" : ""}`));
      more.appendChild(list);
      box.appendChild(more);
    } else {
      box.appendChild(list);
    }
  }
  return box;
}

const REGISTRY = { mermaid: renderMermaid, choice: renderChoice, table: renderTable, citation: renderCitation };

function renderElement(element, ctx) {
  const render = element && REGISTRY[element.type];
  const wrap = el("div", `exhibit-element exhibit-${render ? element.type : "unknown"}`);
  if (!render) {
    wrap.appendChild(el("p", "muted", `Unsupported exhibit element${element && element.type ? ` "${element.type}"` : ""}; its source:`));
    wrap.appendChild(sourceBlock(JSON.stringify(element, null, 2)));
    return wrap;
  }
  try {
    wrap.appendChild(render(element, ctx));
  } catch (err) {
    wrap.appendChild(sourceBlock(JSON.stringify(element, null, 2)));
  }
  return wrap;
}

/** Build the exhibit card for an `exhibit` event; ctx: {onChoice(text), openModal(title, node)}. */
export function renderExhibit(exhibit, ctx) {
  const card = el("section", "exhibit");
  card.dataset.exhibitId = String(exhibit.id || "");
  if (exhibit.title) card.appendChild(el("h3", "exhibit-title", exhibit.title));
  const stack = el("div", "exhibit-stack"); // "stack" is the only layout; others degrade to it
  for (const element of Array.isArray(exhibit.elements) ? exhibit.elements : []) {
    stack.appendChild(renderElement(element, ctx));
  }
  card.appendChild(stack);
  return card;
}

