// ReplyView handlers for the agent's events: agent steps, tool rows, approval cards, images,
// ui_control, plans, guard explanations and exhibits. Mixed into ReplyView by render.js, so
// `this` is the reply; user actions go out through `this.ctx`.

import { button, el } from "./dom.js";
import { renderExhibit } from "./exhibits.js";
import { safeUrl } from "./markdown.js";

const GUARD_TEXT = {
  budget_exceeded: (e) => `The agent stopped because it reached its limit of ${e.limit ?? "?"} tool calls` +
    (e.used != null ? ` (it used ${e.used}).` : "."),
  loop_breaker_triggered: (e) => `The agent was stopped because it kept repeating the same action` +
    (e.tool ? ` (${e.tool}${e.count ? `, ${e.count} times` : ""})` : "") + " without making progress.",
  intent_nudge_exhausted: () => "The agent kept saying it would do something but never actually did it, even after " +
    "being reminded, so this turn was ended.",
};

/** Methods `on_<event type>` added to ReplyView.prototype. */
export const agentHandlers = {
  on_agent_prep(event) {
    const timings = event.data && typeof event.data === "object" ? Object.entries(event.data) : [];
    const node = el("div", "agent-prep", "Preparing the agent…");
    if (timings.length) node.title = timings.map(([k, v]) => `${k}: ${v}`).join(", ");
    this.addBlock(node);
  },

  on_agent_step(event) {
    this.addBlock(el("div", "agent-step", `Round ${event.round ?? ""}`.trim()));
  },

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
  },

  findTool(name) {
    for (let i = this.tools.length - 1; i >= 0; i--) {
      const entry = this.tools[i];
      if (entry.open && (!name || entry.tool === name)) return entry;
    }
    return null;
  },

  on_tool_progress(event) {
    const entry = this.findTool(event.tool);
    if (!entry) return;
    const elapsed = typeof event.elapsed === "number" ? ` (${event.elapsed.toFixed(0)} s)` : "";
    entry.status.textContent = `${event.message || "working"}${elapsed}`;
  },

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
  },

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
  },

  on_tool_approval_resolved(event) {
    const id = event.approval_id || (event.data && event.data.approval_id);
    const cards = [...document.querySelectorAll(".approval-card")];
    const card = (id && cards.find((c) => c.dataset.approvalId === String(id))) || cards.find((c) => c.classList.contains("answered")) || cards[cards.length - 1];
    if (card) card.remove();
    const words = { approve: "Approved", approve_task: "Approved for this task", deny: "Denied" };
    this.addBlock(el("div", `approval-result ${event.decision || ""}`, words[event.decision] || `Decision: ${event.decision}`));
  },

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
  },

  on_ui_control(event) {
    this.ctx.uiControl?.(event.data || {});
  },

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
  },

  on_rounds_exhausted(event) {
    const box = el("div", "guard rounds-exhausted");
    box.appendChild(el("p", null, `The agent used all ${event.rounds ?? "its"} rounds for this turn without finishing.`));
    const go = button("Continue", "continue", () => { if (this.ctx.onContinue() !== false) go.disabled = true; });
    box.appendChild(go);
    this.addBlock(box);
  },

  on_budget_exceeded(event) {
    this.addBlock(el("div", "guard budget-exceeded", GUARD_TEXT.budget_exceeded(event)));
  },

  on_loop_breaker_triggered(event) {
    this.addBlock(el("div", "guard loop-breaker", GUARD_TEXT.loop_breaker_triggered({ ...(event.data || {}), ...event })));
  },

  on_intent_nudge_exhausted(event) {
    this.addBlock(el("div", "guard intent-nudge", GUARD_TEXT.intent_nudge_exhausted(event)));
  },

  on_exhibit(event) {
    const card = renderExhibit(event, this.ctx);
    const previous = event.id && this.exhibits.get(event.id);
    if (previous && previous.isConnected) previous.replaceWith(card);
    else this.addBlock(card);
    if (event.id) this.exhibits.set(event.id, card);
  },
};
