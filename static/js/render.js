// One view per message. A ReplyView renders an assistant reply from chat-stream events (live or
// replayed) or from a saved history row; it never talks to the network itself: user actions go
// out through the `ctx` callbacks the page passes in. A reply is composed of parts, one object per
// kind of content (agent, documents, context, files, window, research, delegations), each in its own
// module; stream_events.js maps every event to the part (or the view) that handles it.

import { AgentPart } from "./agent_render.js";
import { DocPart } from "./doc_render.js";
import { ContextPart } from "./context_render.js";
import { FileContextPart } from "./file_context_render.js";
import { DelegationPart } from "./delegation_render.js";
import { labelRegenerate, regenerateButton } from "./branches.js";
import { button, el } from "./dom.js";
import { copyText } from "./clipboard.js";
import { setMarkdown } from "./markdown.js";
import { RatingPart } from "./rating_render.js";
import { ResearchPart } from "./research_render.js";
import { dispatch } from "./stream_events.js";
import { WindowPart } from "./window_render.js";

/**
 * What the page passes to every message view: the callbacks user actions go out through.
 * @typedef {object} ViewContext
 * @property {(view: UserView | ReplyView) => void} onEdit
 * @property {(view: UserView | ReplyView) => void} onDelete
 * @property {(view: ReplyView) => void} [onRegenerate]
 * @property {() => void} [onGrow] the list grew (keep it scrolled to the end)
 * @property {() => unknown} onContinue "Continue" after the agent ran out of rounds (false: refused)
 * @property {(data: Record<string, any>, decision: string) => unknown} onApproval an approval card's answer (false: refused)
 * @property {(data: Record<string, any>) => void} [uiControl] the agent's ui_control
 * @property {(path: string) => void} [onWorkspaceRejected]
 * @property {any} [documents] the document panel (documents.js): observe(event), openById(id), on_doc_suggestions(...)
 * @property {(view: ReplyView, rating: {value: number, comment: string | null} | null) => Promise<{rating: import("./rating_render.js").Rating | null}>} [onRate]
 *   rate a saved reply (null removes its rating); answers with the rating the server kept
 */

/**
 * A chat-stream event as the page receives it (fields depend on `type`; see docs/protocol.md).
 * @typedef {{type: string} & Record<string, any>} StreamEvent
 */

/**
 * Token counts and timings of a reply (usage and metrics events, saved metadata).
 * @typedef {Record<string, any>} Metrics
 */

/**
 * "1.4 s · 59 tokens · 195 tok/s · $0.0012" from a metrics/usage map.
 * @param {Metrics | null | undefined} metrics
 * @returns {string}
 */
export function metricsText(metrics) {
  if (!metrics) return "";
  const parts = [];
  const seconds = metrics.total_time ?? (metrics.total_time_ms != null ? metrics.total_time_ms / 1000 : null);
  if (typeof seconds === "number") parts.push(`${seconds < 10 ? seconds.toFixed(1) : Math.round(seconds)} s`);
  const out = metrics.output_tokens;
  if (typeof out === "number") parts.push(`${out}${metrics.tokens_estimated ? "≈" : ""} tokens`);
  if (typeof metrics.input_tokens === "number") parts.push(`${metrics.input_tokens} in`);
  if (typeof metrics.tokens_per_second === "number") parts.push(`${Math.round(metrics.tokens_per_second)} tok/s`);
  const cost = metrics.cost ?? metrics.cost_usd;
  if (typeof cost === "number") parts.push(`$${cost < 0.01 ? cost.toFixed(4) : cost.toFixed(2)}`);
  return parts.join(" · ");
}

const FAILED = new Set(["error", "failed", "interrupted", "timeout", "run_timeout"]);
/** The line a paused agent turn writes for text-only clients; the page shows the approval card instead. */
const WAITING_LINE = /^\[Waiting for your approval\b[^\n]*\]\s*$/gm;

/**
 * An error as one line of text, whatever shape it came in.
 * @param {unknown} error
 * @returns {string}
 */
function errorText(error) {
  if (!error) return "";
  if (typeof error === "string") return error;
  const record = /** @type {Record<string, unknown>} */ (error);
  return String(record.message || record.error || JSON.stringify(error));
}

/**
 * A "Copy" button that copies the message's markdown source (the whole message, not only code).
 * @param {UserView | ReplyView} view
 */
function copyButton(view) {
  const copy = button("Copy", "copy-message", async () => {
    const ok = await copyText(view.text);
    copy.textContent = ok ? "Copied" : "Copy failed";
    setTimeout(() => { copy.textContent = "Copy"; }, 1500);
  }, "Copy the whole message");
  return copy;
}

/**
 * Give a message view its database id and its Copy, Edit and Delete buttons.
 * @param {UserView | ReplyView} view
 * @param {number} id
 */
function enableActions(view, id) {
  view.id = id;
  view.el.dataset.messageId = String(id);
  view.actions.textContent = "";
  view.actions.append(copyButton(view), button("Edit", "edit", () => view.ctx.onEdit(view)),
                      button("Delete", "delete", () => view.ctx.onDelete(view)));
  if (view instanceof ReplyView && view.ctx.onRegenerate) view.actions.append(regenerateButton(view)); // branches.js
  if (view instanceof ReplyView) view.rating.enable(); // rating_render.js: thumbs up or down
}

/** A user's message bubble. */
export class UserView {
  /**
   * @param {string} text
   * @param {ViewContext} ctx
   * @param {{id?: number | null, clientId?: string | null}} [options]
   */
  constructor(text, ctx, { id = null, clientId = null } = {}) {
    this.ctx = ctx;
    this.text = text;
    this.id = id;
    this.clientId = clientId;
    this.el = el("article", "msg user");
    this.el.setAttribute("aria-label", "Your message");
    this.body = el("div", "msg-body", text);
    this.actions = el("div", "msg-actions");
    this.el.append(this.body, this.actions);
    if (id !== null) this.setMessageId(id);
  }

  /**
   * Enable edit and delete once the message has a database id.
   * @param {number} id
   */
  setMessageId(id) {
    enableActions(this, id);
  }

  /**
   * Show new text after an edit.
   * @param {string} text
   */
  setText(text) {
    this.text = text;
    this.body.textContent = text;
  }
}

/**
 * An assistant reply, built from stream events (live or replayed) or from a saved message.
 * Its parts sit in fixed regions, so a reply looks the same whichever way it was built:
 * header, reasoning, plan, activity (approval result, the tool rows that ran before any text),
 * exhibits, the text (markdown segments, with the tool rows that ran between them), notices (guard boxes, an approval card), status line, metrics, actions.
 */
export class ReplyView {
  /** @param {ViewContext} ctx */
  constructor(ctx) {
    this.ctx = ctx;
    /** @type {number | null} */
    this.id = null;
    this.text = "";
    this.thinking = "";
    this.deltas = 0; // text and reasoning deltas seen (an estimate of tokens when no usage came)
    /** @type {Metrics} */
    this.usage = {};
    this.renderPending = false;
    /** @type {HTMLElement & {replyView?: ReplyView}} */
    this.el = el("article", "msg assistant streaming");
    this.el.setAttribute("aria-label", "Reply");
    this.el.replyView = this; // the page settles earlier replies' choices when a message is sent
    this.header = el("header", "msg-head");
    this.label = el("span", "model-label", "Assistant");
    this.header.appendChild(this.label);
    this.reasoning = el("details", "reasoning");
    this.reasoning.hidden = true;
    this.reasoning.appendChild(el("summary", null, "Reasoning"));
    this.reasoningText = el("div", "reasoning-text");
    this.reasoning.appendChild(this.reasoningText);
    this.planBox = el("div", "plan-box region");
    this.activity = el("div", "agent-activity region");
    this.exhibitsBox = el("div", "exhibits region");
    this.body = el("div", "msg-body");
    this.segment = el("div", "segment markdown");
    this.body.appendChild(this.segment);
    /** The text's segments: each shows `text` from its `start` to the next one's, with the tool rows
     *  that ran between them in the body too, so an agent's text keeps its order with its tools.
     *  @type {Array<{el: HTMLElement, start: number}>} */
    this.segments = [{ el: this.segment, start: 0 }];
    this.renderAll = false; // true when every segment must be drawn again (setText), not only the last
    this.notices = el("div", "agent-notices region");
    this.statusLine = el("div", "status-line");
    this.statusLine.setAttribute("role", "status");
    this.footer = el("footer", "metrics");
    this.actions = el("div", "msg-actions");
    this.rating = new RatingPart(this); // under the actions, once the reply is saved
    this.el.append(this.header, this.reasoning, this.planBox, this.activity, this.exhibitsBox, this.body,
                   this.notices, this.statusLine, this.footer, this.actions, this.rating.box);
    // The parts, one per kind of content; each keeps its own state and draws into the regions above.
    this.agent = new AgentPart(this);
    this.docs = new DocPart(this);
    this.context = new ContextPart(this);
    this.files = new FileContextPart(this);
    this.window = new WindowPart(this);
    this.research = new ResearchPart(this);
    this.delegation = new DelegationPart(this);
    this.setStatus("waiting", "Waiting for the model…");
  }

  /**
   * Show a transient state line (waiting, working, reconnecting, stopping) or clear it with null.
   * @param {string | null} kind
   * @param {string | null} text
   */
  setStatus(kind, text) {
    this.statusLine.dataset.kind = kind || "";
    this.statusLine.textContent = text || "";
    this.el.dataset.status = kind || "";
  }

  /**
   * Mark the reply final: ok, stopped or failed (partial text stays visible).
   * @param {"ok" | "stopped" | "failed"} outcome
   * @param {string} [detail] why it failed
   */
  finish(outcome, detail) {
    this.flush();
    this.el.classList.remove("streaming");
    this.el.classList.toggle("stopped", outcome === "stopped");
    this.el.classList.toggle("failed", outcome === "failed");
    this.el.dataset.outcome = outcome;
    if (outcome !== "ok") {
      this.agent.closeTools();
      this.delegation.closeDelegations();
    }
    if (outcome === "stopped") this.setStatus("stopped", "Stopped" + (this.text ? " — partial reply shown." : " before any text arrived."));
    else if (outcome === "failed") this.setStatus("failed", "Failed: " + (detail || "the reply could not be completed") + (this.text ? " (partial reply shown)" : ""));
    else this.setStatus(null, null);
    labelRegenerate(this); // "Retry" on a failed or stopped reply
  }

  /**
   * Enable edit and delete: the reply is saved under `id`.
   * @param {number} id
   */
  setMessageId(id) {
    enableActions(this, id);
  }

  /**
   * Disable the reply's choices once a later message answered it (agent_render.js).
   * @param {string} [nextText] the text of that message
   */
  settle(nextText) {
    this.agent.settle(nextText);
  }

  /**
   * Replace the shown text (after an edit, or from history); tool rows and cards stay.
   * @param {string} text
   */
  setText(text) {
    this.text = text;
    this.renderPending = true;
    this.renderAll = true;
    this.renderSegment();
  }

  /**
   * Put a tool row where the text has got to: in the activity region while no text came before it,
   * else in the body after the text before it, with the text after it in a new segment below.
   * @param {HTMLElement} row
   * @param {number} [offset] where in `text` it ran (UTF-16 units); the text so far when live
   */
  placeRow(row, offset = this.text.length) {
    if (offset <= 0) {
      this.addBlock(row);
      return;
    }
    const last = this.segments[this.segments.length - 1];
    if (offset > last.start) {
      this.renderPending = true;
      this.renderSegment(); // the text before the row is final: draw it now
      const next = el("div", "segment markdown");
      this.body.append(row, next);
      this.segments.push({ el: next, start: offset });
    } else {
      this.body.insertBefore(row, last.el); // no text since the last row: the rows stay in their order
    }
    this.ctx.onGrow?.();
  }

  /**
   * Add streamed text; the markdown is rendered at most once per animation frame.
   * @param {string} text
   */
  appendText(text) {
    this.text += text;
    if (this.renderPending) return;
    this.renderPending = true;
    requestAnimationFrame(() => this.renderSegment());
  }

  /** Render the text's markdown if it changed since the last render. */
  renderSegment() {
    if (!this.renderPending) return;
    this.renderPending = false;
    const count = this.segments.length;
    for (let i = this.renderAll ? 0 : count - 1; i < count; i++) {
      const end = i + 1 < count ? this.segments[i + 1].start : this.text.length;
      const part = this.text.slice(this.segments[i].start, end);
      // the approval card stands for the reply's last "[Waiting for your approval ...]" line
      setMarkdown(this.segments[i].el, this.agent.cardShown && i === count - 1 ? part.replace(WAITING_LINE, "").trimEnd() : part);
    }
    this.renderAll = false;
    if (this.research.researchSources) this.research.linkCitations(); // a research report's [n] link to its sources
    this.ctx.onGrow?.();
  }

  /** Render pending text now. */
  flush() {
    this.renderSegment();
  }

  /**
   * Append a block to one of the reply's regions (activity, exhibits or notices).
   * @template {HTMLElement} T
   * @param {T} node
   * @param {HTMLElement} [region]
   * @returns {T}
   */
  addBlock(node, region = this.activity) {
    region.appendChild(node);
    this.ctx.onGrow?.();
    return node;
  }

  /**
   * Name the model that answered in the reply's header.
   * @param {Record<string, any>} info a model_info event or a saved reply's metadata.model_info (label, provider, model, route)
   */
  setLabel(info) {
    const label = info.label || [info.provider, info.model].filter(Boolean).join(" / ") || info.route || "Assistant";
    this.label.textContent = label;
    this.label.title = info.route || "";
  }

  /**
   * Apply one chat-stream event (through the table in stream_events.js).
   * @param {StreamEvent} event
   */
  handle(event) {
    dispatch(this, event); // the explicit event -> handler table (stream_events.js)
    this.ctx.documents?.observe(event); // the document panel follows the same stream
    if (this.statusLine.dataset.kind === "waiting" && event.type !== "done") this.setStatus(null, null);
  }

  /** @param {StreamEvent} event */
  on_delta(event) {
    this.deltas += 1;
    if (event.thinking) {
      this.thinking += event.delta;
      this.reasoning.hidden = false;
      this.reasoningText.textContent = this.thinking;
      return;
    }
    this.appendText(event.delta);
  }

  /** @param {StreamEvent} event */
  on_model_info(event) {
    this.setLabel(event);
  }

  /** @param {Record<string, any>} event a fallback event, or a saved reply's metadata.fallback */
  on_fallback(event) {
    this.header.querySelector(".fallback-note")?.remove();
    const note = el("span", "fallback-note",
      `Answered by ${event.answered || "another route"}` + (event.requested ? ` instead of ${event.requested}` : "") +
      (event.reason ? ` — ${event.reason}` : ""));
    this.header.appendChild(note);
  }

  /** @param {StreamEvent} event */
  on_usage(event) {
    Object.assign(this.usage, event.data || {});
    this.footer.textContent = metricsText(this.usage);
  }

  /** @param {StreamEvent} event */
  on_metrics(event) {
    this.footer.textContent = metricsText({ ...this.usage, ...(event.data || {}) });
  }

  /** @param {StreamEvent} event */
  on_message_saved(event) {
    if (event.role === undefined || event.role === "assistant") this.setMessageId(event.message_id);
  }

  /** @param {StreamEvent} event */
  on_chat_terminal(event) {
    this.terminal(event.data || {});
  }

  /** @param {StreamEvent} event */
  on_agent_terminal(event) {
    this.terminal(event.data || {});
  }

  /**
   * The run's terminal record (chat_terminal / agent_terminal): its outcome, ids and totals.
   * @param {Record<string, any>} data
   */
  terminal(data) {
    if (data.message_id != null && this.id === null) this.setMessageId(data.message_id);
    if (!this.footer.textContent) {
      // A stopped or failed reply gets no metrics event: keep its time and tokens from the terminal record.
      const usage = data.usage || {};
      const counted = usage.output_tokens == null && this.deltas ? { output_tokens: this.deltas, tokens_estimated: true } : {};
      this.footer.textContent = metricsText({ ...usage, ...counted, total_time_ms: (data.timing || {}).total_time_ms });
    }
    if (data.status === "stopped") this.finish("stopped");
    else if (FAILED.has(data.status)) this.finish("failed", errorText(data.error) || data.stop_reason || data.status);
    else this.finish("ok"); // done, or a pause such as waiting for an approval
  }

  /** @param {StreamEvent} [_event] */
  on_done(_event) {
    if (!this.el.dataset.outcome) this.finish("ok");
  }

  /** @param {StreamEvent} event */
  on_error(event) {
    this.finish("failed", event.error || "stream error");
  }

  /**
   * Show a saved history row with the same regions a live reply builds. `history` tells what
   * came after it: {answered: Set of approval ids answered later, later: true when more follows}.
   * @param {{id: number, content?: string, thinking?: string, metadata?: Record<string, any>,
   *          rating?: import("./rating_render.js").Rating | null}} message
   * @param {ViewContext} ctx
   * @param {{answered?: Set<string>, later?: boolean}} [history]
   * @returns {ReplyView}
   */
  static fromMessage(message, ctx, history = {}) {
    const view = new ReplyView(ctx);
    const meta = message.metadata || {};
    if (meta.model_info) view.setLabel(meta.model_info);
    if (meta.fallback) view.on_fallback(meta.fallback);
    if (message.thinking) view.on_delta({ type: "delta", delta: message.thinking, thinking: true });
    view.context.restoreContext(meta); // context_render.js: memories pill, web sources, context notices
    view.window.restoreWindow(meta); // window_render.js: "12 of 40 messages sent"
    view.text = message.content || ""; // restoreAgent places tool rows at their offsets in it
    view.agent.restoreAgent(meta, history);
    view.docs.restoreDocs(meta);
    view.files.restoreFileContext(meta); // file_context_render.js: rag sources and attachment notices
    view.research.restoreResearch(meta);
    view.delegation.restoreDelegations(meta);
    view.setText(message.content || "");
    view.footer.textContent = metricsText(meta.metrics || { ...(meta.usage || {}), total_time_ms: meta.total_time_ms });
    view.setMessageId(message.id);
    view.rating.restore(message.rating);
    if (meta.stopped || meta.status === "stopped") view.finish("stopped");
    else if (FAILED.has(meta.status)) view.finish("failed", errorText(meta.error) || meta.status);
    else view.finish("ok");
    return view;
  }
}
