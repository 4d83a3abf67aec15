// The model's window on the page: the "12 of 40 messages sent" notice of a trimmed turn
// (context_trimmed, live and from a saved reply's metadata), the collapsible divider that stands
// for a compaction summary (compacted, live and as a saved system message), and the small
// context meter under the composer (GET /api/sessions/{id}/context).

import { api } from "./api.js";
import { el } from "./dom.js";

/** "12 of 40 messages sent" (and what else was left out) for context_trimmed counts. */
export function trimmedText(counts) {
  const parts = [`${counts.messages_after} of ${counts.messages_before} messages sent to fit the model's window`];
  if ((counts.dropped_sources || []).length) parts.push(`left out: ${[...new Set(counts.dropped_sources)].join(", ")}`);
  if (counts.shortened_chars) parts.push(`your message was shortened by ${counts.shortened_chars} characters`);
  return parts.join(" · ");
}

/** The divider for a summary: "N earlier messages summarised", opening to the summary text. */
export function summaryDivider(summary, count, messageId = null) {
  const box = el("details", "summary-divider");
  if (messageId != null) box.dataset.messageId = String(messageId);
  box.appendChild(el("summary", null, `${count} earlier message${count === 1 ? "" : "s"} summarised`));
  box.appendChild(el("div", "summary-text", summary || ""));
  return box;
}

/** The window part of a reply: the trimming notice and the compaction divider. */
export class WindowPart {
  /** @param {import("./render.js").ReplyView} view the reply this part draws into */
  constructor(view) {
    this.view = view;
  }

  on_context_trimmed(event) {
    const counts = event.data || {};
    this.view.context.contextNotice(trimmedText(counts), "window");
    this.view.context.contextRegion?.lastElementChild?.classList.add("trimmed-notice");
  }

  on_compacted(event) {
    const data = event.data || {};
    this.view.el.before(summaryDivider(data.summary, (data.summarized_ids || []).length, data.message_id));
  }

  /** The trimming notice of a saved reply. */
  restoreWindow(meta) {
    if (meta.context_trimmed) this.on_context_trimmed({ data: meta.context_trimmed });
  }
}

/** The context meter: estimated tokens of the session against the model's window. */
export class ContextMeter {
  constructor(node) {
    this.node = node;
    this.token = 0;
  }

  clear() {
    this.token += 1;
    this.node.hidden = true;
    this.node.textContent = "";
  }

  async refresh(sessionId, model) {
    const token = ++this.token;
    if (!sessionId) return this.clear();
    let data;
    try {
      const query = model ? `?model=${encodeURIComponent(model)}` : "";
      data = await api("GET", `/api/sessions/${encodeURIComponent(sessionId)}/context${query}`);
    } catch (err) {
      return undefined; // the meter is a hint: a failed estimate leaves it as it was
    }
    if (token !== this.token) return undefined;
    const share = data.context_length ? Math.min(1, data.estimated_tokens / data.context_length) : 0;
    this.node.textContent = "";
    const bar = el("meter", "context-meter-bar");
    bar.min = 0;
    bar.max = 1;
    bar.low = 0.6;
    bar.high = 0.8;
    bar.optimum = 0;
    bar.value = share;
    const k = (n) => (n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n));
    const label = el("span", "context-meter-text", `≈${k(data.estimated_tokens)} / ${k(data.context_length)} tokens`);
    this.node.append(bar, label);
    this.node.title = `${data.model}: about ${data.estimated_tokens} of ${data.context_length} tokens of context used`
      + (data.summarized_messages ? ` (${data.summarized_messages} messages summarised)` : "");
    this.node.dataset.share = share.toFixed(2);
    this.node.hidden = false;
    return data;
  }
}
