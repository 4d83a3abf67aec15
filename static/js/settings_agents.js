// Settings → Agents: the user's named agents (GET/POST /api/agents, PATCH/DELETE /api/agents/{id}), so
// a workflow (workflows.js) can be built without the API. An agent has a name, a system prompt, a model
// (empty: the turn's model) and the tools it may use (GET /api/agent/tools; none ticked: every tool).
// The list is redrawn from the server after every change; the server's error is shown beside the form.

import { api } from "./api.js";
import { button, el } from "./dom.js";
import { field, input, result, section, select } from "./settings_widgets.js";

/** @param {{models: string[]}} options */
export function agents(options) {
  const box = section("Agents", "settings-agents");
  box.appendChild(el("p", "muted",
    "Agents answer agent-mode turns with their own prompt, model and tools; a workflow (Workflows…) " +
    "puts one in charge of others."));
  const table = el("table", "library-list agent-list");
  const out = el("div", "result");
  out.setAttribute("role", "status");
  const form = el("form", "library-form agent-form");
  const heading = el("h4", null, "New agent");
  const name = input("text", "agent_name");
  name.maxLength = 200;
  const agentId = input("text", "agent_id");
  agentId.placeholder = "brave_turing (made up when empty)";
  agentId.maxLength = 100;
  agentId.spellcheck = false;
  const idField = field("Id (two lowercase words joined by _; optional)", agentId);
  const prompt = el("textarea");
  prompt.name = "agent_system_prompt";
  prompt.maxLength = 20000;
  prompt.placeholder = "You are a careful researcher. Cite your sources.";
  const model = select("agent_model", [["", "(the model of the turn)"], ...options.models.map((m) => [m, m])], "");
  const tools = el("fieldset", "tool-choices");
  tools.appendChild(el("legend", null, "Tools (none ticked: every tool)"));
  /** @type {HTMLInputElement[]} */
  let toolBoxes = [];
  const save = el("button", "primary save-agent", "Save agent");
  save.type = "submit";
  let editing = null; // the agent being edited, or null for a new one
  const cancel = button("Cancel", "cancel-agent", () => reset());
  cancel.hidden = true;
  const actions = el("div", "row");
  actions.append(save, cancel);
  form.append(heading, field("Name", name), idField, field("System prompt", prompt), field("Model", model), tools,
              actions);

  function setModel(value) {
    if (value && ![...model.options].some((o) => o.value === value)) {
      model.appendChild(new Option(`${value} (unavailable)`, value));
    }
    model.value = value || "";
  }

  function setTools(list) {
    for (const check of toolBoxes) check.checked = Array.isArray(list) && list.includes(check.value);
  }

  function reset() {
    editing = null;
    heading.textContent = "New agent";
    name.value = agentId.value = prompt.value = "";
    idField.hidden = false;
    setModel("");
    setTools(null);
    cancel.hidden = true;
  }

  function edit(agent) {
    editing = agent;
    heading.textContent = `Edit ${agent.name || agent.agent_id}`;
    name.value = agent.name || "";
    idField.hidden = true; // an agent's id never changes
    prompt.value = agent.system_prompt || "";
    setModel(agent.model);
    setTools(agent.tools);
    cancel.hidden = false;
    name.focus();
  }

  async function loadTools() {
    let data;
    try {
      data = await api("GET", "/api/agent/tools");
    } catch (err) {
      result("error", `Could not load the tools: ${err.message}`, out);
      return;
    }
    toolBoxes = data.tools.map((tool) => {
      const check = input("checkbox", "agent_tool", tool.name);
      const label = field(tool.name, check, true);
      label.title = tool.description;
      tools.appendChild(label);
      return check;
    });
  }

  async function load() {
    let data;
    try {
      data = await api("GET", "/api/agents");
    } catch (err) {
      result("error", err.message, out);
      return;
    }
    table.textContent = "";
    if (!data.agents.length) table.appendChild(el("tr")).appendChild(el("td", "muted", "No agents yet."));
    for (const agent of data.agents) {
      const row = el("tr", "agent-row");
      row.dataset.agentId = agent.agent_id;
      const label = agent.name || agent.agent_id;
      const actionsCell = el("td", "actions");
      actionsCell.append(
        button("Edit", "edit-agent", () => edit(agent), `Edit ${label}`),
        button("Delete", "delete-agent", async () => {
          if (!confirm(`Delete the agent ${label}?`)) return;
          try {
            await api("DELETE", `/api/agents/${encodeURIComponent(agent.agent_id)}`);
            if (editing && editing.agent_id === agent.agent_id) reset();
            result("ok", `${label} deleted.`, out);
            load();
          } catch (err) {
            result("error", err.message, out);
          }
        }, `Delete ${label}`));
      const tools = Array.isArray(agent.tools) ? agent.tools.join(", ") || "no tools" : "every tool";
      row.append(el("td", "agent-row-name", label), el("td", "muted", agent.agent_id),
                 el("td", "muted", agent.model || "turn's model"), el("td", "muted", tools), actionsCell);
      table.appendChild(row);
    }
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const ticked = toolBoxes.filter((check) => check.checked).map((check) => check.value);
    const body = {
      name: name.value, system_prompt: prompt.value || null, model: model.value || null,
      tools: ticked.length ? ticked : null,
    };
    if (!editing && agentId.value.trim()) body.agent_id = agentId.value.trim();
    try {
      const saved = editing
        ? await api("PATCH", `/api/agents/${encodeURIComponent(editing.agent_id)}`, body)
        : await api("POST", "/api/agents", body);
      result("ok", `${saved.name || saved.agent_id} saved.`, out);
      reset();
      load();
    } catch (err) {
      result("error", err.message, out);
    }
  });
  box.append(table, form, out);
  loadTools().then(load);
  return box;
}
