// One view per message. A ReplyView renders an assistant reply from chat-stream events (live or
// replayed) or from a saved history row; it never talks to the network itself: user actions go
// out through the `ctx` callbacks the page passes in.

import { renderExhibit } from "./exhibits.js";
import { safeUrl, setMarkdown } from "./markdown.js";

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function button(label, className, onClick, aria) {
  const node = el("button", className, label);
  node.type = "button";
  if (aria) node.setAttribute("aria-label", aria);
  node.addEventListener("click", onClick);
  return node;
}

/** "1.4 s · 59 tokens · 195 tok/s · $0.0012" from a metrics/usage map. */
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

function errorText(error) {
  if (!error) return "";
  if (typeof error === "string") return error;
  return error.message || error.error || JSON.stringify(error);
}

const GUARD_TEXT = {
  budget_exceeded: (e) => `The agent stopped because it reached its limit of ${e.limit ?? "?"} tool calls` +
    (e.used != null ? ` (it used ${e.used}).` : "."),
  loop_breaker_triggered: (e) => `The agent was stopped because it kept repeating the same action` +
    (e.tool ? ` (${e.tool}${e.count ? `, ${e.count} times` : ""})` : "") + " without making progress.",
  intent_nudge_exhausted: () => "The agent kept saying it would do something but never actually did it, even after " +
    "being reminded, so this turn was ended.",
};

/** A user's message bubble. */
export class UserView {
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

  /** Enable edit and delete once the message has a database id. */
  setMessageId(id) {
    this.id = id;
    this.el.dataset.messageId = String(id);
    this.actions.textContent = "";
    this.actions.append(button("Edit", "edit", () => this.ctx.onEdit(this)),
                        button("Delete", "delete", () => this.ctx.onDelete(this)));
  }

  /** Show new text after an edit. */
  setText(text) {
    this.text = text;
    this.body.textContent = text;
  }
}

/** An assistant reply, built from stream events or a saved message. */
export class ReplyView {
  constructor(ctx) {
    this.ctx = ctx;
    this.id = null;
    this.text = "";
    this.thinking = "";
    this.usage = {};
    this.segment = null;
    this.tools = [];
    this.exhibits = new Map();
    this.renderPending = new Set();
    this.el = el("article", "msg assistant streaming");
    this.el.setAttribute("aria-label", "Reply");
    this.header = el("header", "msg-head");
    this.label = el("span", "model-label", "Assistant");
    this.header.appendChild(this.label);
    this.reasoning = el("details", "reasoning");
    this.reasoning.hidden = true;
    this.reasoning.appendChild(el("summary", null, "Reasoning"));
    this.reasoningText = el("div", "reasoning-text");
    this.reasoning.appendChild(this.reasoningText);
    this.body = el("div", "msg-body");
    this.statusLine = el("div", "status-line");
    this.statusLine.setAttribute("role", "status");
    this.footer = el("footer", "metrics");
    this.actions = el("div", "msg-actions");
    this.el.append(this.header, this.reasoning, this.body, this.statusLine, this.footer, this.actions);
    this.setStatus("waiting", "Waiting for the model…");
  }

  /** Show a transient state line (waiting, reconnecting, stopping) or clear it with null. */
  setStatus(kind, text) {
    this.statusLine.dataset.kind = kind || "";
    this.statusLine.textContent = text || "";
    this.el.dataset.status = kind || "";
  }

  /** Mark the reply final: ok, stopped or failed (partial text stays visible). */
  finish(outcome, detail) {
    this.flush();
    this.el.classList.remove("streaming");
    this.el.classList.toggle("stopped", outcome === "stopped");
    this.el.classList.toggle("failed", outcome === "failed");
    this.el.dataset.outcome = outcome;
    if (outcome === "stopped") this.setStatus("stopped", "Stopped" + (this.text ? " — partial reply shown." : " before any text arrived."));
    else if (outcome === "failed") this.setStatus("failed", "Failed: " + (detail || "the reply could not be completed") + (this.text ? " (partial reply shown)" : ""));
    else this.setStatus(null, null);
  }

  /** Enable edit and delete: the reply is saved under `id`. */
  setMessageId(id) {
    this.id = id;
    this.el.dataset.messageId = String(id);
    this.actions.textContent = "";
    this.actions.append(button("Edit", "edit", () => this.ctx.onEdit(this)),
                        button("Delete", "delete", () => this.ctx.onDelete(this)));
  }

  /** Replace the shown text (after an edit, or from history). */
  setText(text) {
    this.text = text;
    this.body.textContent = "";
    this.segment = null;
    if (text) this.appendText(text);
    this.flush();
  }

  appendText(text) {
    if (!this.segment) {
      this.segment = { el: el("div", "segment markdown"), text: "" };
      this.body.appendChild(this.segment.el);
    }
    this.segment.text += text;
    this.scheduleRender(this.segment);
  }

  scheduleRender(segment) {
    if (this.renderPending.has(segment)) return;
    this.renderPending.add(segment);
    requestAnimationFrame(() => this.renderSegment(segment));
  }

  renderSegment(segment) {
    if (!this.renderPending.delete(segment)) return;
    setMarkdown(segment.el, segment.text);
    this.ctx.onGrow?.();
  }

  /** Render every pending text segment now. */
  flush() {
    for (const segment of [...this.renderPending]) this.renderSegment(segment);
  }

  /** Append a non-text block; the next text starts a new segment below it. */
  addBlock(node) {
    this.segment = null;
    this.body.appendChild(node);
    this.ctx.onGrow?.();
    return node;
  }

  setLabel(info) {
    const label = info.label || [info.provider, info.model].filter(Boolean).join(" / ") || info.route || "Assistant";
    this.label.textContent = label;
    this.label.title = info.route || "";
  }

  /** Apply one chat-stream event. */
  handle(event) {
    const handler = this[`on_${event.type}`];
    if (typeof handler === "function") handler.call(this, event);
    if (this.statusLine.dataset.kind === "waiting" && event.type !== "done") this.setStatus(null, null);
  }

  on_delta(event) {
    if (event.thinking) {
      this.thinking += event.delta;
      this.reasoning.hidden = false;
      this.reasoningText.textContent = this.thinking;
      return;
    }
    this.text += event.delta;
    this.appendText(event.delta);
  }

  on_model_info(event) {
    this.setLabel(event);
  }

  on_fallback(event) {
    const note = el("span", "fallback-note",
      `Answered by ${event.answered || "another route"}` + (event.requested ? ` instead of ${event.requested}` : "") +
      (event.reason ? ` — ${event.reason}` : ""));
    this.header.appendChild(note);
  }

  on_usage(event) {
    Object.assign(this.usage, event.data || {});
    this.footer.textContent = metricsText(this.usage);
  }

  on_metrics(event) {
    this.footer.textContent = metricsText({ ...this.usage, ...(event.data || {}) });
  }

  on_message_saved(event) {
    if (event.role === undefined || event.role === "assistant") this.setMessageId(event.message_id);
  }

  on_chat_terminal(event) {
    this.terminal(event.data || {});
  }

  on_agent_terminal(event) {
    this.terminal(event.data || {});
  }

  terminal(data) {
    if (data.message_id != null && this.id === null) this.setMessageId(data.message_id);
    if (data.status === "stopped") this.finish("stopped");
    else if (FAILED.has(data.status)) this.finish("failed", errorText(data.error) || data.stop_reason || data.status);
    else this.finish("ok"); // done, or a pause such as waiting for an approval
  }

  on_done() {
    if (!this.el.dataset.outcome) this.finish("ok");
  }

  on_error(event) {
    this.finish("failed", event.error || "stream error");
  }

  on_agent_prep(event) {
    const timings = event.data && typeof event.data === "object" ? Object.entries(event.data) : [];
    const node = el("div", "agent-prep", "Preparing the agent…");
    if (timings.length) node.title = timings.map(([k, v]) => `${k}: ${v}`).join(", ");
    this.addBlock(node);
  }

  on_agent_step(event) {
    this.addBlock(el("div", "agent-step", `Round ${event.round ?? ""}`.trim()));
  }

  on_tool_start(event) {
    const row = el("details", "tool-row running");
    const summary = el("summary");
    summary.append(el("span", "tool-name", event.tool || "tool"), el("code", "tool-command", event.command || ""),
                   el("span", "tool-status", "running…"));
    row.appendChild(summary);
    if (event.full_command && event.full_command !== event.command) row.appendChild(el("pre", "tool-full", event.full_command));
    const output = el("pre", "tool-output");
    output.hidden = true;
    row.appendChild(output);
    this.tools.push({ tool: event.tool, row, output, status: summary.lastChild, open: true });
    this.addBlock(row);
  }

  findTool(name) {
    for (let i = this.tools.length - 1; i >= 0; i--) {
      const entry = this.tools[i];
      if (entry.open && (!name || entry.tool === name)) return entry;
    }
    return null;
  }

  on_tool_progress(event) {
    const entry = this.findTool(event.tool);
    if (!entry) return;
    const elapsed = typeof event.elapsed === "number" ? ` (${event.elapsed.toFixed(0)} s)` : "";
    entry.status.textContent = `${event.message || "working"}${elapsed}`;
  }

  on_tool_output(event) {
    let entry = this.findTool(event.tool);
    if (!entry) {
      this.on_tool_start({ tool: event.tool, command: event.command });
      entry = this.findTool(event.tool);
    }
    entry.open = false;
    const failed = event.exit_code !== undefined && event.exit_code !== null && event.exit_code !== 0;
    entry.row.classList.remove("running");
    entry.row.classList.add(failed ? "failed" : "ok");
    entry.status.textContent = failed ? `exit ${event.exit_code}` : "done";
    const output = typeof event.output === "string" ? event.output : JSON.stringify(event.output, null, 2);
    entry.output.textContent = output || "(no output)";
    entry.output.hidden = false;
  }

  on_ask_user(event) {
    const data = event.data || {};
    const card = el("section", "approval-card");
    card.dataset.approvalId = String(data.approval_id || "");
    if (data.kind === "tool_approval") {
      const call = data.call || data.tool_call || {};
      const tool = data.tool || call.tool || call.name || "a tool";
      card.appendChild(el("h4", null, `Allow ${tool}?`));
      const detail = data.command || call.command || call.arguments || data.arguments;
      if (detail) card.appendChild(el("pre", "approval-detail", typeof detail === "string" ? detail : JSON.stringify(detail, null, 2)));
      if (data.reason || data.message) card.appendChild(el("p", null, data.reason || data.message));
      const row = el("div", "approval-actions");
      const decide = (decision) => {
        if (this.ctx.onApproval(data, decision) === false) return;
        for (const b of row.querySelectorAll("button")) b.disabled = true;
        card.classList.add("answered");
      };
      row.append(button("Approve", "approve", () => decide("approve")),
                 button("Approve for this task", "approve-task", () => decide("approve_task")),
                 button("Deny", "deny", () => decide("deny")));
      card.appendChild(row);
    } else {
      card.appendChild(el("h4", null, "The agent asks"));
      card.appendChild(el("p", null, data.question || data.message || JSON.stringify(data)));
    }
    this.addBlock(card);
  }

  on_tool_approval_resolved(event) {
    const id = event.approval_id || (event.data && event.data.approval_id);
    const cards = [...document.querySelectorAll(".approval-card")];
    const card = (id && cards.find((c) => c.dataset.approvalId === String(id))) || cards.find((c) => c.classList.contains("answered")) || cards[cards.length - 1];
    if (card) card.remove();
    const words = { approve: "Approved", approve_task: "Approved for this task", deny: "Denied" };
    this.addBlock(el("div", `approval-result ${event.decision || ""}`, words[event.decision] || `Decision: ${event.decision}`));
  }

  on_generated_image(event) {
    const url = safeUrl(event.url, { allowDataImage: true });
    if (!url) return;
    const figure = el("figure", "generated-image");
    const img = el("img");
    img.src = url;
    img.alt = event.alt || event.prompt || "Generated image";
    img.loading = "lazy";
    figure.appendChild(img);
    if (event.prompt) figure.appendChild(el("figcaption", null, event.prompt));
    this.addBlock(figure);
  }

  on_ui_control(event) {
    this.ctx.uiControl?.(event.data || {});
  }

  on_plan_update(event) {
    const data = event.data;
    const steps = Array.isArray(data) ? data : (data && (data.steps || data.items || data.plan)) || [];
    if (!this.plan) {
      this.plan = el("section", "plan");
      this.plan.appendChild(el("h4", null, "Plan"));
      this.planList = el("ol");
      this.plan.appendChild(this.planList);
      this.addBlock(this.plan);
    }
    this.planList.textContent = "";
    for (const step of Array.isArray(steps) ? steps : []) {
      const text = typeof step === "string" ? step : step.title || step.text || step.step || step.content || JSON.stringify(step);
      const li = el("li", `plan-step ${step.status || "pending"}`, text);
      if (step.status) li.dataset.status = step.status;
      this.planList.appendChild(li);
    }
  }

  on_rounds_exhausted(event) {
    const box = el("div", "guard rounds-exhausted");
    box.appendChild(el("p", null, `The agent used all ${event.rounds ?? "its"} rounds for this turn without finishing.`));
    const go = button("Continue", "continue", () => { if (this.ctx.onContinue() !== false) go.disabled = true; });
    box.appendChild(go);
    this.addBlock(box);
  }

  on_budget_exceeded(event) {
    this.addBlock(el("div", "guard budget-exceeded", GUARD_TEXT.budget_exceeded(event)));
  }

  on_loop_breaker_triggered(event) {
    this.addBlock(el("div", "guard loop-breaker", GUARD_TEXT.loop_breaker_triggered({ ...(event.data || {}), ...event })));
  }

  on_intent_nudge_exhausted(event) {
    this.addBlock(el("div", "guard intent-nudge", GUARD_TEXT.intent_nudge_exhausted(event)));
  }

  on_exhibit(event) {
    const card = renderExhibit(event, this.ctx);
    const previous = event.id && this.exhibits.get(event.id);
    if (previous && previous.isConnected) previous.replaceWith(card);
    else this.addBlock(card);
    if (event.id) this.exhibits.set(event.id, card);
  }

  /** Show a saved history row. */
  static fromMessage(message, ctx) {
    const view = new ReplyView(ctx);
    const meta = message.metadata || {};
    if (meta.model_info) view.setLabel(meta.model_info);
    if (message.thinking) view.on_delta({ delta: message.thinking, thinking: true });
    view.setText(message.content || "");
    view.footer.textContent = metricsText(meta.metrics || meta.usage);
    view.setMessageId(message.id);
    if (meta.stopped || meta.status === "stopped") view.finish("stopped");
    else if (FAILED.has(meta.status)) view.finish("failed", errorText(meta.error) || meta.status);
    else view.finish("ok");
    return view;
  }
}
