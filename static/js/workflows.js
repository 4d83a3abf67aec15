// Agent Alloy on the page: the workflow picker (in the composer, shown in the Workflow mode; also in
// the header's "⋯" menu), and a small screen (in the modal) to create, edit and delete workflows
// from the user's agents. In the Workflow mode, turns are agent turns with `workflow_id`; picking a
// workflow selects that mode; the choice is remembered across reloads.

import { api } from "./api.js";
import { button, el } from "./dom.js";

const STORAGE = "odysseus-workflow";

export class Workflows {
  /**
   * `select` and `manage` are the picker and its button; `openModal(title, node)` shows a screen;
   * `openAgents()` opens Settings → Agents, where agents are made.
   */
  constructor({ select, manage, openModal, closeModal, toast, onPick, openAgents }) {
    this.openAgents = openAgents;
    this.select = select;
    this.manage = manage;
    this.openModal = openModal;
    this.closeModal = closeModal;
    this.toast = toast;
    this.onPick = onPick;
    this.list = [];
    select.addEventListener("change", () => {
      localStorage.setItem(STORAGE, select.value);
      if (select.value) onPick?.(select.value);
    });
    manage.addEventListener("click", () => this.openScreen());
  }

  /** Pick the workflow `id` (the header menu's choice), as if chosen in the picker. */
  pick(id) {
    this.select.value = id;
    this.select.dispatchEvent(new Event("change"));
  }

  /** The picked workflow id, or "" for none. */
  value() {
    return this.select.value;
  }

  /** Fill the picker with the user's workflows, keeping the remembered choice when it still exists. */
  async load() {
    try {
      this.list = (await api("GET", "/api/alloy/workflows")).workflows;
    } catch (err) {
      this.toast(`Could not load workflows: ${err.message}`);
      return;
    }
    const wanted = this.select.value || localStorage.getItem(STORAGE) || "";
    this.select.textContent = "";
    this.select.appendChild(new Option("No workflow", ""));
    for (const workflow of this.list) this.select.appendChild(new Option(workflow.name, workflow.id));
    this.select.value = this.list.some((w) => w.id === wanted) ? wanted : "";
  }

  /** The management screen: the list of workflows and a "New workflow" button. */
  async openScreen() {
    let agents;
    try {
      agents = (await api("GET", "/api/agents")).agents;
      await this.load();
    } catch (err) {
      this.toast(`Could not load agents: ${err.message}`);
      return;
    }
    const screen = el("div", "workflow-screen");
    if (agents.length < 2) {
      const hint = el("p", "workflow-needs-agents",
        "A workflow needs at least two agents (a supervisor and a specialist). Create them in ");
      hint.append(button("Settings → Agents", "link open-agents", () => this.openAgents()), ".");
      screen.appendChild(hint);
    } else {
      const more = el("p", "muted", "Agents are made and changed in ");
      more.append(button("Settings → Agents", "link open-agents", () => this.openAgents()), ".");
      screen.appendChild(more);
    }
    const list = el("ul", "workflow-list");
    for (const workflow of this.list) {
      const item = el("li");
      item.dataset.workflowId = workflow.id;
      item.append(el("span", "wf-name", workflow.name), el("code", null, workflow.id),
                  button("Edit", "wf-edit", () => this.openEditor(agents, workflow)),
                  button("Delete", "wf-delete", () => this.remove(workflow, agents)));
      list.appendChild(item);
    }
    screen.append(list, button("New workflow", "wf-new primary", () => this.openEditor(agents, null)));
    this.openModal("Workflows", screen);
  }

  async remove(workflow, agents) {
    if (!confirm(`Delete the workflow ${workflow.name}?`)) return;
    try {
      await api("DELETE", `/api/alloy/workflows/${encodeURIComponent(workflow.id)}`);
    } catch (err) {
      this.toast(`Could not delete: ${err.message}`);
      return;
    }
    await this.openScreen();
  }

  /** The form for a new (`workflow` null) or an existing workflow. */
  openEditor(agents, workflow) {
    const form = el("form", "workflow-editor");
    const field = (label, input) => {
      const wrap = el("label", null, label);
      wrap.appendChild(input);
      form.appendChild(wrap);
      return input;
    };
    const name = field("Name", Object.assign(el("input"), { type: "text", name: "name", value: workflow?.name || "" }));
    const id = field("Id (lowercase letters, digits and dashes; optional)",
                     Object.assign(el("input"), { type: "text", name: "id", value: workflow?.id || "" }));
    id.disabled = !!workflow;
    const description = field("Description", Object.assign(el("textarea"), { name: "description", rows: 2 }));
    description.value = workflow?.description || "";
    const supervisor = field("Supervisor", Object.assign(el("select"), { name: "supervisor" }));
    for (const agent of agents) supervisor.appendChild(new Option(`${agent.name || agent.agent_id} (${agent.agent_id})`, agent.agent_id));
    if (workflow) supervisor.value = workflow.supervisor_agent_id;
    const members = new Map((workflow?.members || []).map((m) => [m.agent_id, m]));
    const box = el("fieldset", "wf-specialists");
    box.appendChild(el("legend", null, "Specialists (and when to use each)"));
    const rows = [];
    for (const agent of agents) {
      const row = el("div", "wf-member");
      row.dataset.agentId = agent.agent_id;
      const check = Object.assign(el("input"), { type: "checkbox", name: "specialist", value: agent.agent_id });
      const member = members.get(agent.agent_id);
      check.checked = !!member && member.role === "specialist";
      const label = el("label", null, agent.agent_id);
      label.prepend(check);
      const hint = Object.assign(el("input"), { type: "text", name: "hint", placeholder: "delegation hint",
                                                value: member?.delegation_hint || "" });
      hint.setAttribute("aria-label", `Delegation hint for ${agent.agent_id}`);
      row.append(label, hint);
      box.appendChild(row);
      rows.push({ agent, check, hint, row });
    }
    form.appendChild(box);
    const syncRows = () => {
      for (const { agent, check, row } of rows) {
        const isSupervisor = agent.agent_id === supervisor.value;
        row.hidden = isSupervisor;
        if (isSupervisor) check.checked = false;
      }
    };
    supervisor.addEventListener("change", syncRows);
    syncRows();
    const error = el("p", "wf-error");
    error.setAttribute("role", "alert");
    form.append(error, Object.assign(el("button", "primary", workflow ? "Save" : "Create"), { type: "submit" }));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const body = {
        name: name.value, description: description.value || null, supervisor_agent_id: supervisor.value,
        members: [{ agent_id: supervisor.value, role: "supervisor" }, ...rows.filter((r) => r.check.checked)
          .map((r) => ({ agent_id: r.agent.agent_id, role: "specialist", ...(r.hint.value ? { delegation_hint: r.hint.value } : {}) }))],
      };
      if (!workflow && id.value.trim()) body.id = id.value.trim();
      try {
        const saved = workflow
          ? await api("PATCH", `/api/alloy/workflows/${encodeURIComponent(workflow.id)}`, body)
          : await api("POST", "/api/alloy/workflows", body);
        await this.load();
        this.select.value = saved.workflow.id;
        localStorage.setItem(STORAGE, saved.workflow.id);
        this.closeModal();
        this.toast(`Workflow ${saved.workflow.name} saved`);
      } catch (err) {
        error.textContent = err.message;
      }
    });
    this.openModal(workflow ? `Edit ${workflow.name}` : "New workflow", form);
    name.focus();
  }
}
