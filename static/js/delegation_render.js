// A reply's handlers for Agent Alloy delegations: one card per delegation inside the supervisor's
// reply, nested under its parent delegation, showing the specialist, its task, its streamed text,
// its tool rows, status, tokens and time. restoreDelegations() builds the same cards from a saved
// reply's metadata.delegations (the fold of the same events), so a reload looks like the live view.
// One DelegationPart per ReplyView (its `delegation`).

import { el } from "./dom.js";

const STATUS_WORDS = {
  running: "working…", success: "done", failed: "failed", awaiting_approval: "waiting for your approval",
  stopped: "stopped",
};

function metaText(info) {
  const parts = [];
  if (typeof info.tokens_input === "number") parts.push(`${info.tokens_input} in`);
  if (typeof info.tokens_output === "number") parts.push(`${info.tokens_output} out`);
  if (typeof info.duration_ms === "number") {
    const seconds = info.duration_ms / 1000;
    parts.push(`${seconds < 10 ? seconds.toFixed(1) : Math.round(seconds)} s`);
  }
  return parts.join(" · ");
}

function toolText(value) {
  if (value === undefined || value === null) return "";
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** The Agent Alloy part of a reply: one card per delegation (and their history form). */
export class DelegationPart {
  /** @param {import("./render.js").ReplyView} view the reply this part draws into */
  constructor(view) {
    this.view = view;
    /** @type {HTMLElement | null} */
    this.delegationsBox = null;
    /** @type {Map<string, any>} delegation id -> its card */
    this.delegationCards = new Map();
  }

  /** The region holding this reply's top-level delegation cards, made on first use. */
  delegationBox() {
    if (!this.delegationsBox) {
      this.delegationsBox = el("div", "delegations region");
      this.delegationsBox.setAttribute("aria-label", "Delegations");
      this.view.activity.after(this.delegationsBox);
      this.delegationCards = new Map();
    }
    return this.delegationsBox;
  }

  /** The card of a delegation, created (under its parent's card when it has one) on first sight. */
  delegationCard(info) {
    this.delegationBox();
    const id = String(info.delegation_id || "");
    let card = this.delegationCards.get(id);
    if (card) return card;
    const node = el("section", "delegation");
    node.dataset.delegationId = id;
    node.dataset.agent = info.target_agent_id || "";
    const head = el("header", "delegation-head");
    const agent = el("span", "delegation-agent", info.target_agent_id || "(no specialist)");
    const status = el("span", "delegation-status");
    const meta = el("span", "delegation-meta");
    head.append(el("span", "delegation-icon", "↳"), agent, status, meta);
    const task = el("p", "delegation-task", info.task || "");
    task.hidden = !info.task;
    const tools = el("div", "delegation-tools");
    const text = el("div", "delegation-text");
    const error = el("p", "delegation-error");
    error.hidden = true;
    const children = el("div", "delegation-children");
    node.append(head, task, tools, text, error, children);
    card = { node, status, meta, task, tools, text, error, children, rows: new Map() };
    this.delegationCards.set(id, card);
    const parent = info.parent_delegation_id && this.delegationCards.get(String(info.parent_delegation_id));
    (parent ? parent.children : this.delegationsBox).appendChild(node);
    this.setDelegationStatus(card, "running");
    this.view.ctx.onGrow?.();
    return card;
  }

  setDelegationStatus(card, status) {
    card.node.dataset.status = status;
    card.status.textContent = STATUS_WORDS[status] || status;
  }

  delegationToolRow(card, info) {
    const key = String(info.tool_call_id || card.rows.size);
    let row = card.rows.get(key);
    if (row) return row;
    const node = el("details", "delegation-tool running");
    const summary = el("summary");
    const state = el("span", "tool-status", "running…");
    summary.append(el("span", "tool-name", info.tool || "tool"), el("code", "tool-command", info.command || ""), state);
    const output = el("pre", "tool-output");
    output.hidden = true;
    node.append(summary, output);
    card.tools.appendChild(node);
    row = { node, state, output };
    card.rows.set(key, row);
    return row;
  }

  delegationToolDone(row, info) {
    const ok = info.success !== false;
    row.node.classList.remove("running");
    row.node.classList.add(ok ? "ok" : "failed");
    row.state.textContent = (ok ? "done" : "failed") + (typeof info.duration_ms === "number" ? ` (${Math.round(info.duration_ms)} ms)` : "");
    row.output.textContent = toolText(info.content) || "(no output)";
    row.output.hidden = false;
  }

  delegationDone(card, info) {
    this.setDelegationStatus(card, info.status || "failed");
    card.meta.textContent = metaText(info);
    if (info.error) {
      card.error.textContent = info.error;
      card.error.hidden = false;
    }
    if (!card.task.textContent && info.task) {
      card.task.textContent = info.task;
      card.task.hidden = false;
    }
  }

  on_delegation_start(event) {
    const card = this.delegationCard(event);
    this.setDelegationStatus(card, "running");
    this.view.setStatus("working", `${event.target_agent_id || "A specialist"} is working…`);
  }

  on_delegation_chunk(event) {
    const card = this.delegationCard(event);
    card.text.textContent += event.content || "";
    this.view.ctx.onGrow?.();
  }

  on_delegation_tool_call(event) {
    this.delegationToolRow(this.delegationCard(event), event);
  }

  on_delegation_tool_result(event) {
    const card = this.delegationCard(event);
    this.delegationToolDone(this.delegationToolRow(card, event), event);
  }

  on_delegation_complete(event) {
    this.delegationDone(this.delegationCard(event), event);
  }

  /** An approval asked inside a delegation: its card says it is waiting. */
  markDelegationWaiting(delegationId) {
    const card = delegationId && this.delegationCards && this.delegationCards.get(String(delegationId));
    if (card) this.setDelegationStatus(card, "awaiting_approval");
  }

  /** The reply ended stopped or failed: cards still working were cut off. */
  closeDelegations() {
    for (const card of (this.delegationCards || new Map()).values()) {
      if (card.node.dataset.status === "running") this.setDelegationStatus(card, "stopped");
      for (const row of card.rows.values()) {
        if (!row.node.classList.contains("running")) continue;
        row.node.classList.replace("running", "cancelled");
        row.state.textContent = "cancelled";
      }
    }
  }

  /** Rebuild the cards of a saved reply from metadata.delegations. */
  restoreDelegations(meta) {
    for (const record of Array.isArray(meta.delegations) ? meta.delegations : []) {
      const card = this.delegationCard(record);
      for (const tool of Array.isArray(record.tools) ? record.tools : []) {
        const row = this.delegationToolRow(card, tool);
        if ("success" in tool) this.delegationToolDone(row, tool);
      }
      card.text.textContent = record.content || "";
      // stopped and paused cards show what a live view shows (no totals); running ones are closed by finish()
      if (record.status === "success" || record.status === "failed") this.delegationDone(card, record);
      else if (record.status && record.status !== "running") this.setDelegationStatus(card, record.status);
    }
  }
}
