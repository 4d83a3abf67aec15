// A reply's handlers for the context events (memories_used, web_sources, workspace_rejected,
// notice) and restoreContext(), which builds the same blocks from a saved reply's metadata
// (memories_used, web_sources, web_notice, workspace_rejected). Live and history share one builder
// per block, so the pill and the sources look the same after a reload. One ContextPart per ReplyView
// (its `context`); the blocks sit in one "context" region right under the reply's text.

import { el } from "./dom.js";
import { safeUrl } from "./markdown.js";

function hostOf(url) {
  try {
    return new URL(url).host;
  } catch (err) {
    return "";
  }
}

/** The context part of a reply: memories pill, web sources, context notices. */
export class ContextPart {
  /** @param {import("./render.js").ReplyView} view the reply this part draws into */
  constructor(view) {
    this.view = view;
    /** @type {HTMLElement | null} */
    this.contextRegion = null;
  }

  /** The region under the text that holds sources, the memory pill and context notices. */
  contextBox() {
    if (!this.contextRegion) {
      this.contextRegion = el("div", "reply-context region");
      this.view.body.after(this.contextRegion);
    }
    return this.contextRegion;
  }

  /** The "N memories used" pill; opens to the list of memories (pinned or recalled). */
  memoriesPill(rows) {
    if (!Array.isArray(rows) || !rows.length) return;
    this.contextBox().querySelector(".memories-pill")?.remove();
    const pill = el("details", "memories-pill");
    pill.appendChild(el("summary", null, `${rows.length} ${rows.length === 1 ? "memory" : "memories"} used`));
    const list = el("ul", "memories-used");
    for (const row of rows) {
      const item = el("li", `memory-used ${row.type === "pinned" ? "pinned" : "recalled"}`);
      if (row.id) item.dataset.memoryId = String(row.id);
      item.append(el("span", "memory-kind", row.type === "pinned" ? "pinned" : "recalled"),
                  el("span", "memory-category", row.category || "general"), el("span", "memory-text", row.text || ""));
      list.appendChild(item);
    }
    pill.appendChild(list);
    this.contextBox().appendChild(pill);
    this.view.ctx.onGrow?.();
  }

  /** The web sources a chat turn searched, as links with their snippets. */
  webSources(rows) {
    if (!Array.isArray(rows) || !rows.length) return;
    this.contextBox().querySelector(".web-sources")?.remove();
    const box = el("details", "web-sources");
    box.open = true;
    box.appendChild(el("summary", null, `Web sources (${rows.length})`));
    const list = el("ol", "web-source-list");
    for (const row of rows) {
      const item = el("li", "web-source");
      const href = safeUrl(row.url || "");
      const title = row.title || row.url || "source";
      if (href) {
        const link = el("a", "web-source-title", title);
        link.href = href;
        link.target = "_blank";
        link.rel = "noopener noreferrer nofollow";
        item.appendChild(link);
      } else {
        item.appendChild(el("span", "web-source-title", title));
      }
      const host = hostOf(row.url || "");
      if (host) item.appendChild(el("span", "web-source-host", host));
      if (row.snippet) item.appendChild(el("p", "web-source-snippet", row.snippet));
      list.appendChild(item);
    }
    box.appendChild(list);
    this.contextBox().appendChild(box);
    this.view.ctx.onGrow?.();
  }

  /** A context notice (web search failed, workspace not used, ...). */
  contextNotice(text, source) {
    if (!text) return;
    const box = el("p", `context-notice ${source ? `from-${source}` : ""}`.trim(), text);
    box.setAttribute("role", "note");
    this.contextBox().appendChild(box);
  }

  on_memories_used(event) {
    this.memoriesPill(event.data);
  }

  on_web_sources(event) {
    // The agent's web_search tool also sends web_sources; its results show as a citation exhibit.
    if (this.view.agent.tools.length) return;
    this.webSources(event.data);
  }

  on_workspace_rejected(event) {
    this.view.ctx.onWorkspaceRejected?.((event.data || {}).path);
  }

  on_notice(event) {
    this.contextNotice(event.message, event.source);
  }

  /** Rebuild the context blocks of a saved reply from its metadata. */
  restoreContext(meta) {
    if (meta.workspace_rejected) this.contextNotice(meta.workspace_rejected.notice, "workspace");
    this.webSources(meta.web_sources);
    if (meta.web_notice) this.contextNotice(meta.web_notice, "web");
    this.memoriesPill(meta.memories_used);
  }
}
