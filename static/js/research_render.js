// A reply's handlers for research jobs: the progress panel (phase, round, sources, findings,
// warnings), built from research_progress / research_sources / research_findings / research_done
// events, or from a saved reply's metadata.research by restoreResearch(); and clickable [n]
// citations in the report. Replaying the run's events rebuilds the panel exactly, so a reload
// mid-job shows the same panel. One ResearchPart per ReplyView (its `research`).

import { el } from "./dom.js";
import { safeUrl } from "./markdown.js";

const PHASES = {
  probing: "Checking the model and the search backend…", planning: "Planning the searches…",
  searching: "Searching", reading: "Reading", analyzing: "Analyzing the findings", writing: "Writing the report…",
  done: "Done", cancelled: "Cancelled", error: "Failed", stopped: "Stopped",
};

function sourceLink(source) {
  const url = safeUrl(source.url);
  const label = source.title || source.url || "source";
  if (!url) return el("span", "research-source", label);
  const link = el("a", "research-source", label);
  link.href = url;
  link.target = "_blank";
  link.rel = "noopener noreferrer";
  link.title = source.url;
  return link;
}

/** The research part of a reply: the progress panel and the report's [n] citations. */
export class ResearchPart {
  /** @param {import("./render.js").ReplyView} view the reply this part draws into */
  constructor(view) {
    this.view = view;
    /** @type {any} the panel's parts and counts, made on first use */
    this.research = null;
    /** @type {Array<{url: string, title?: string}> | null} a report's sources, for its [n] links */
    this.researchSources = null;
  }

  /** The panel, created on first use just above the reply's text. */
  researchPanel() {
    if (this.research) return this.research;
    const panel = el("section", "research-panel");
    panel.setAttribute("aria-label", "Research progress");
    const head = el("header", "research-head");
    const phase = el("span", "research-phase");
    head.append(el("strong", null, "Research"), phase);
    const counts = el("div", "research-counts");
    const sources = el("ol", "research-sources");
    const findingsBox = el("details", "research-findings");
    const findingsTitle = el("summary", null, "Findings (0)");
    const findings = el("ul");
    findingsBox.append(findingsTitle, findings);
    const warnings = el("ul", "research-warnings");
    panel.append(head, counts, sources, findingsBox, warnings);
    this.view.body.before(panel);
    this.research = { panel, phase, counts, sources, findingsBox, findingsTitle, findings, warnings,
                      round: null, totals: { sources: 0, findings: 0 }, urls: new Set(), list: [] };
    return this.research;
  }

  researchPhase(phase, data = {}) {
    const r = this.researchPanel();
    if (data.round != null) r.round = data.round;
    r.panel.dataset.phase = phase;
    let text = PHASES[phase] || phase;
    if (r.round != null && ["searching", "reading", "analyzing"].includes(phase)) text += ` · round ${r.round}`;
    if (phase === "reading" && data.title) text += `: ${data.title}`;
    r.phase.textContent = text;
    if (data.total_sources != null) r.totals.sources = data.total_sources;
    if (data.total_findings != null) r.totals.findings = data.total_findings;
    r.counts.textContent = `${r.totals.sources} source${r.totals.sources === 1 ? "" : "s"} · ` +
      `${r.totals.findings} finding${r.totals.findings === 1 ? "" : "s"}`;
  }

  researchSource(source) {
    const r = this.researchPanel();
    if (!source || !source.url || r.urls.has(source.url)) return;
    r.urls.add(source.url);
    r.list.push(source);
    const item = el("li");
    item.appendChild(sourceLink(source));
    r.sources.appendChild(item);
  }

  researchFindings(rows) {
    const r = this.researchPanel();
    r.findings.textContent = "";
    for (const row of rows) {
      const item = el("li", row.excerpt ? "excerpt" : null, row.summary || "");
      if (row.url) item.title = row.url;
      r.findings.appendChild(item);
    }
    r.findingsTitle.textContent = `Findings (${rows.length})`;
  }

  on_research_progress(event) {
    const data = event.data || {};
    if (data.phase === "warning" || data.phase === "error") {
      this.researchPanel().warnings.appendChild(el("li", data.phase, data.message || data.phase));
      if (data.phase === "error") this.researchPhase("error");
      return;
    }
    this.researchPhase(data.phase, data);
    if (data.phase === "reading") this.researchSource({ url: data.url, title: data.title });
    this.view.setStatus("working", PHASES[data.phase] ? `Research: ${PHASES[data.phase]}` : "Researching…");
  }

  on_research_sources(event) {
    const rows = Array.isArray(event.data) ? event.data : [];
    const r = this.researchPanel();
    r.sources.textContent = "";
    r.urls.clear();
    r.list = [];
    for (const source of rows) this.researchSource(source);
    this.researchSources = r.list;
  }

  on_research_findings(event) {
    this.researchFindings(Array.isArray(event.data) ? event.data : []);
  }

  on_research_done(event) {
    const r = this.researchPanel();
    if (event.data && event.data.job_id) r.panel.dataset.jobId = event.data.job_id;
    this.researchPhase("done");
    this.view.setStatus(null, null);
  }

  /** A saved research reply: the same panel, from metadata.research. */
  restoreResearch(meta) {
    const research = meta.research;
    if (!research || !research.job_id) return;
    const stats = research.stats || {};
    const sources = Array.isArray(research.sources) ? research.sources : [];
    const findings = Array.isArray(research.findings) ? research.findings : [];
    const r = this.researchPanel();
    r.panel.dataset.jobId = research.job_id;
    if (stats.rounds) r.round = stats.rounds;
    for (const message of research.warnings || []) r.warnings.appendChild(el("li", "warning", message));
    for (const source of sources) this.researchSource(source);
    this.researchSources = r.list;
    this.researchFindings(findings);
    const phase = meta.status === "stopped" ? "cancelled" : meta.status === "error" ? "error" : "done";
    this.researchPhase(phase, { total_sources: sources.length, total_findings: findings.length });
  }

  /** Turn "[n]" in the rendered report into links to source n (text outside links and code only). */
  linkCitations() {
    const sources = this.researchSources || [];
    if (!sources.length) return;
    const walker = document.createTreeWalker(this.view.segment, NodeFilter.SHOW_TEXT, {
      acceptNode: (node) => (node.parentElement.closest("a, code, pre") ? NodeFilter.FILTER_REJECT
        : /\[\d{1,3}\]/.test(node.nodeValue) ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_SKIP),
    });
    const nodes = [];
    while (walker.nextNode()) nodes.push(/** @type {Text} */ (walker.currentNode));
    for (const node of nodes) {
      const parts = node.nodeValue.split(/(\[\d{1,3}\])/);
      const fragment = document.createDocumentFragment();
      for (const part of parts) {
        const match = /^\[(\d{1,3})\]$/.exec(part);
        const source = match ? sources[Number(match[1]) - 1] : null;
        const url = source ? safeUrl(source.url) : null;
        if (!url) {
          fragment.appendChild(document.createTextNode(part));
          continue;
        }
        const link = el("a", "citation", part);
        link.href = url;
        link.target = "_blank";
        link.rel = "noopener noreferrer";
        link.title = source.title || source.url;
        fragment.appendChild(link);
      }
      node.replaceWith(fragment);
    }
  }
}
