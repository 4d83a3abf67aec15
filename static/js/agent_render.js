// A reply's handlers for the agent's events: tool rows, approval cards, images, ui_control, plans,
// guard explanations and exhibits, plus restoreAgent(), which builds the same blocks from a saved
// reply's metadata. Live and history share one builder per block, so a reply looks the same after
// a reload. One AgentPart per ReplyView (its `agent`); user actions go out through the view's `ctx`.

import { button, el } from "./dom.js";
import { renderExhibit } from "./exhibits.js";
import { safeUrl } from "./markdown.js";

const GUARD_TEXT = {
  budget_exceeded: (e) => `The agent stopped because it reached its limit of ${e.limit ?? "?"} tool calls` +
    (e.used != null ? ` (it had used ${e.used}).` : "."),
  loop_breaker_triggered: (e) => "The agent was stopped because it kept repeating the same action" +
    (e.tool ? ` (${e.tool}${e.repeats ? `, ${e.repeats} times` : ""})` : "") + " without making progress.",
  intent_nudge_exhausted: () => "The agent kept saying it would do something but never actually did it, even after " +
    "being reminded, so this turn was ended.",
  rounds_exhausted: (e) => `The agent used all ${e.rounds ?? "its"} rounds for this turn without finishing.`,
};
const GUARD_CLASS = { budget_exceeded: "budget-exceeded", loop_breaker_triggered: "loop-breaker",
                      intent_nudge_exhausted: "intent-nudge", rounds_exhausted: "rounds-exhausted" };
const DECISION_WORDS = { approve: "Approved", approve_task: "Approved for this task", deny: "Denied" };

/** The text an approval card shows for a call: its command or code, else its arguments as JSON. */
function callDetail(args) {
  if (!args || typeof args !== "object") return args ? String(args) : "";
  for (const key of ["command", "code", "url", "query"]) {
    if (typeof args[key] === "string") return args[key];
  }
  return Object.keys(args).length ? JSON.stringify(args, null, 2) : "";
}

function imageFigure(url) {
  const safe = safeUrl(url, { allowDataImage: true });
  if (!safe) return null;
  const figure = el("figure", "generated-image");
  const img = el("img");
  img.src = safe;
  img.alt = "Generated image";
  img.loading = "lazy";
  figure.appendChild(img);
  return figure;
}

/**
 * The UTF-16 index in `text` of a saved row's `text_offset` (counted in code points by the server);
 * 0 for a row saved without one (before issue 35 every row was drawn above the text).
 * @param {string} text
 * @param {unknown} offset
 */
function textIndex(text, offset) {
  if (typeof offset !== "number" || offset <= 0) return 0;
  return Array.from(text).slice(0, offset).join("").length;
}

/** The agent's part of a reply: `on_<event type>` handlers and their history counterparts. */
export class AgentPart {
  /** @param {import("./render.js").ReplyView} view the reply this part draws into */
  constructor(view) {
    this.view = view;
    /** @type {Array<{tool: string, callId: string | null, row: HTMLElement, output: HTMLElement, status: HTMLElement, open: boolean}>} */
    this.tools = [];
    this.cardShown = false; // an approval card stands for the reply's waiting line
    /** @type {Map<string, HTMLElement>} exhibit id -> its card */
    this.exhibits = new Map();
    this.settled = false; // a later message answered this reply's choices
  }

  // agent_prep / agent_step are progress, not content: they only change the status line.
  on_agent_prep(_event) {
    this.view.setStatus("working", "Preparing the agent…");
  }

  on_agent_step(event) {
    this.view.setStatus("working", `Round ${event.round ?? ""}: waiting for the model…`);
  }

  /**
   * A tool row (running until toolDone); the same for tool_start and a saved tool row.
   * @param {Record<string, any>} info
   * @param {number} [offset] where in the reply's text it ran; the text so far when live
   */
  toolRow(info, offset) {
    const row = el("details", "tool-row running");
    if (info.call_id) row.dataset.callId = String(info.call_id);
    if (info.round != null) row.dataset.round = String(info.round);
    const summary = el("summary");
    const status = el("span", "tool-status", "running…");
    const mcp = info.mcp && typeof info.mcp === "object" ? info.mcp : null;  // an MCP server's tool: name its server
    if (mcp) {
      row.dataset.server = String(mcp.server);
      summary.appendChild(el("span", "tool-server", `MCP ${mcp.server}`));
    }
    summary.append(el("span", "tool-name", (mcp && mcp.tool) || info.tool || "tool"), el("code", "tool-command", info.command || ""), status);
    row.appendChild(summary);
    if (info.full_command && info.full_command !== info.command) row.appendChild(el("pre", "tool-full", info.full_command));
    const output = el("pre", "tool-output");
    output.hidden = true;
    row.appendChild(output);
    const entry = { tool: info.tool, callId: info.call_id || null, row, output, status, open: true };
    this.tools.push(entry);
    this.view.placeRow(row, offset);
    return entry;
  }

  /** Mark a tool row finished with its exit code and output. */
  toolDone(entry, result) {
    entry.open = false;
    const code = result.exit_code;
    const failed = code !== undefined && code !== null && code !== 0;
    entry.row.classList.remove("running");
    entry.row.classList.add(failed ? "failed" : "ok");
    entry.status.textContent = failed ? `exit ${code}` : "done";
    const output = typeof result.output === "string" ? result.output : JSON.stringify(result.output, null, 2);
    entry.output.textContent = output || "(no output)";
    entry.output.hidden = false;
  }

  /** Rows still running when the reply ended (stopped or failed) were cut off. */
  closeTools() {
    for (const entry of this.tools) {
      if (!entry.open) continue;
      entry.open = false;
      entry.row.classList.remove("running");
      entry.row.classList.add("cancelled");
      entry.status.textContent = "cancelled";
    }
  }

  findTool(name, callId) {
    for (let i = this.tools.length - 1; i >= 0; i--) {
      const entry = this.tools[i];
      if (!entry.open) continue;
      if (callId && entry.callId) {
        if (entry.callId === callId) return entry;
      } else if (!name || entry.tool === name) {
        return entry;
      }
    }
    return null;
  }

  on_tool_start(event) {
    this.toolRow(event);
  }

  on_tool_progress(event) {
    const entry = this.findTool(event.tool, event.call_id);
    if (!entry) return;
    const elapsed = typeof event.elapsed === "number" ? ` (${event.elapsed.toFixed(0)} s)` : "";
    entry.status.textContent = `${event.message || "working"}${elapsed}`;
  }

  on_tool_output(event) {
    const entry = this.findTool(event.tool, event.call_id) || this.toolRow(event);
    this.toolDone(entry, event);
  }

  /** The approval card for an ask_user event or a saved awaiting_approval. */
  approvalCard(data) {
    this.cardShown = true; // the reply's "[Waiting for your approval ...]" line is then the card's (render.js)
    this.view.renderPending = true;
    this.view.renderSegment();
    const card = el("section", "approval-card");
    card.dataset.approvalId = String(data.approval_id || "");
    const call = data.call || {};
    const tool = call.tool || call.name || data.tool || "a tool";
    const mcp = data.mcp && typeof data.mcp === "object" ? data.mcp : null;
    if (mcp) {  // an MCP server's tool: the server, its tool and the exact arguments, all of them
      card.dataset.server = String(mcp.server);
      card.appendChild(el("h4", null, `Allow ${mcp.tool} from the MCP server ${mcp.server}?`));
    } else {
      card.appendChild(el("h4", null, `Allow ${tool}?`));
    }
    if (data.target_agent_id) {  // asked inside an Agent Alloy delegation: say which specialist
      card.dataset.agent = String(data.target_agent_id);
      card.appendChild(el("p", "approval-from muted", `Asked by the specialist ${data.target_agent_id}`));
      this.view.delegation.markDelegationWaiting(data.delegation_id);
    }
    const detail = mcp ? JSON.stringify(call.arguments ?? {}, null, 2) : callDetail(call.arguments);
    if (detail) card.appendChild(el("pre", "approval-detail", detail));
    if (typeof data.expires_at === "number" && data.expires_at * 1000 <= Date.now()) {
      card.classList.add("expired");
      card.appendChild(el("p", "muted", "This request expired; ask the agent again."));
      return this.view.addBlock(card, this.view.notices);
    }
    const row = el("div", "approval-actions");
    const decide = (decision) => {
      if (this.view.ctx.onApproval(data, decision) === false) return;
      for (const b of row.querySelectorAll("button")) b.disabled = true;
      card.classList.add("answered");
    };
    row.append(button("Approve", "approve", () => decide("approve")),
               button("Approve for this task", "approve-task", () => decide("approve_task")),
               button("Deny", "deny", () => decide("deny")));
    card.appendChild(row);
    return this.view.addBlock(card, this.view.notices);
  }

  on_ask_user(event) {
    const data = event.data || {};
    if (data.kind === "tool_approval") {
      this.approvalCard(data);
      return;
    }
    const card = el("section", "approval-card");
    card.appendChild(el("h4", null, "The agent asks"));
    card.appendChild(el("p", null, data.question || data.message || JSON.stringify(data)));
    this.view.addBlock(card, this.view.notices);
  }

  approvalResult(decision) {
    this.view.addBlock(el("div", `approval-result ${decision || ""}`, DECISION_WORDS[decision] || `Decision: ${decision}`));
  }

  on_tool_approval_resolved(event) {
    const id = event.approval_id || (event.data && event.data.approval_id);
    const page = this.view.el.closest("#messages") || document;
    const cards = [.../** @type {NodeListOf<HTMLElement>} */ (page.querySelectorAll(".approval-card"))];
    const card = (id && cards.find((c) => c.dataset.approvalId === String(id))) || cards.find((c) => c.classList.contains("answered"));
    if (card) card.remove();
    this.approvalResult(event.decision);
  }

  on_generated_image(event) {
    const figure = imageFigure(event.url);
    if (!figure) return;
    const entry = this.findTool(event.tool || "generate_image");  // an MCP tool's image goes into its own row
    if (entry) entry.row.appendChild(figure);
    else this.view.addBlock(figure);
  }

  on_ui_control(event) {
    this.view.ctx.uiControl?.(event.data || {});
  }

  /** Show the plan ({steps: [{step, status}], explanation?}, or a list) in its fixed place. */
  on_plan_update(event) {
    const data = event.data;
    const steps = Array.isArray(data) ? data : (data && (data.steps || data.items || data.plan)) || [];
    this.view.planBox.textContent = "";
    const plan = el("section", "plan");
    plan.appendChild(el("h4", null, "Plan"));
    if (data && typeof data.explanation === "string" && data.explanation) plan.appendChild(el("p", "plan-why", data.explanation));
    const list = el("ol");
    for (const step of Array.isArray(steps) ? steps : []) {
      const text = typeof step === "string" ? step : step.title || step.text || step.step || step.content || JSON.stringify(step);
      const li = el("li", `plan-step ${step.status || "pending"}`, text);
      if (step.status) li.dataset.status = step.status;
      list.appendChild(li);
    }
    plan.appendChild(list);
    this.view.planBox.appendChild(plan);
  }

  /** A guard's explanation (Continue for rounds_exhausted); event fields or saved metadata.agent.guard. */
  guardBox(type, data) {
    const box = el("div", `guard ${GUARD_CLASS[type] || type}`);
    box.appendChild(el("p", null, (GUARD_TEXT[type] || (() => `The turn ended: ${type}.`))(data)));
    if (type === "rounds_exhausted") {
      const go = button("Continue", "continue", () => { if (this.view.ctx.onContinue() !== false) go.disabled = true; });
      box.appendChild(go);
    }
    this.view.addBlock(box, this.view.notices);
  }

  on_rounds_exhausted(event) {
    this.guardBox("rounds_exhausted", event);
  }

  on_budget_exceeded(event) {
    this.guardBox("budget_exceeded", event);
  }

  on_loop_breaker_triggered(event) {
    this.guardBox("loop_breaker_triggered", { ...(event.data || {}), ...event });
  }

  on_intent_nudge_exhausted(event) {
    this.guardBox("intent_nudge_exhausted", event);
  }

  /** Show an exhibit; a repeated id replaces it in place, here and in earlier replies (as the server does). */
  on_exhibit(event, { live = true } = {}) {
    const card = renderExhibit(event, this.view.ctx);
    const previous = event.id && this.exhibits.get(event.id);
    if (previous && previous.isConnected) previous.replaceWith(card);
    else this.view.addBlock(card, this.view.exhibitsBox);
    if (!event.id) return;
    this.exhibits.set(event.id, card);
    const page = live && this.view.el.closest("#messages");
    if (!page) return;
    for (const old of /** @type {NodeListOf<HTMLElement>} */ (page.querySelectorAll(".exhibit[data-exhibit-id]"))) {
      if (old.dataset.exhibitId === String(event.id) && !this.view.el.contains(old)) old.replaceWith(renderExhibit(event, this.view.ctx));
    }
  }

  /** Disable the reply's choices and Continue once a later message was sent; mark the chosen option. */
  settle(nextText) {
    if (this.settled) return; // the first message after the reply is the one that answered it
    this.settled = true;
    for (const option of /** @type {NodeListOf<HTMLButtonElement>} */ (this.view.el.querySelectorAll(".choice-option, .guard .continue"))) {
      option.disabled = true;
      if (option.classList.contains("choice-option") && nextText !== undefined && option.textContent === nextText) {
        option.classList.add("chosen");
        option.setAttribute("aria-pressed", "true");
      }
    }
  }

  /** Rebuild the agent blocks of a saved reply from metadata.agent and metadata.exhibits. */
  restoreAgent(meta, { answered = new Set() } = {}) {
    const agent = meta.agent || {};
    if (agent.approval) this.approvalResult(agent.approval.decision);
    if (agent.plan) this.on_plan_update({ data: agent.plan });
    for (const row of Array.isArray(agent.tools) ? agent.tools : []) {
      if (row.denied) continue; // shown by the approval result above
      const entry = this.toolRow(row, textIndex(this.view.text, row.text_offset));
      const urls = row.url && row.tool === "generate_image" ? [row.url] : [];
      for (const url of [...urls, ...(Array.isArray(row.images) ? row.images : [])]) {  // MCP image content
        const figure = imageFigure(url);
        if (figure) entry.row.appendChild(figure);
      }
      if (row.cancelled) continue; // closeTools() marks it when the reply is finished as stopped
      this.toolDone(entry, row);
    }
    for (const exhibit of Array.isArray(meta.exhibits) ? meta.exhibits : []) this.on_exhibit(exhibit, { live: false });
    if (agent.guard && agent.guard.type) this.guardBox(agent.guard.type, agent.guard);
    const waiting = agent.awaiting_approval;
    if (waiting) this.cardShown = true; // answered since or not, the card (or its result) stands for the line
    if (waiting && !answered.has(waiting.approval_id)) this.approvalCard({ kind: "tool_approval", ...waiting });
  }
}
