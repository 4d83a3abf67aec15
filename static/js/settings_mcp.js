// The admin's MCP servers in the settings screen: the list (the configuration's ones read-only,
// labelled) with each server's state, tools and who may use it; an add/edit form; "Test" (a fresh
// connection that lists the tools) and Remove. Header and env values are never sent back by the
// server: the list and the form show only their last four characters, and an edit that leaves a
// value empty keeps the stored one.

import { api } from "./api.js";
import { button, el } from "./dom.js";
import { field, input, result, section, select } from "./settings_widgets.js";

const STATES = { idle: "not started (starts on first use)", starting: "starting…", ready: "ready",
                 unavailable: "unavailable", disabled: "disabled", closed: "closed" };

/** "…abcd" for a stored secret, "set" for a short one. */
function hint(secret) {
  return secret && secret.last4 ? `…${secret.last4}` : "set";
}

/** Who may use a server: everyone, or the users and agent profiles it names. */
function who(server) {
  const named = [...(server.users || []).map((u) => `user ${u}`), ...(server.profiles || []).map((p) => `profile ${p}`)];
  return named.length ? named.join(", ") : "everyone";
}

function stateText(status) {
  const state = (status && status.state) || "idle";
  let text = STATES[state] || state;
  if (status && typeof status.tools === "number") text += ` · ${status.tools} tools`;
  return text;
}

/** The "MCP servers (admin)" section. */
export function mcpServers() {
  const box = section("MCP servers (admin)", "settings-mcp");
  box.appendChild(el("p", "muted", "Tools of Model Context Protocol servers for the agent. A stdio server "
    + "runs as a command (in the sandbox unless you turn it off); a Streamable HTTP server is reached at its "
    + "URL. Header and env values are stored in the server's database and never shown again; only their "
    + "last four characters are. Servers from the TOML file are read-only here."));
  const table = el("table", "mcp-table");
  const out = el("div", "result mcp-result");
  out.setAttribute("role", "status");
  const form = serverForm(out, () => load());
  const refresh = button("Refresh", "refresh-mcp", () => load());
  const load = async () => {
    let data;
    try {
      data = await api("GET", "/api/admin/mcp-servers");
    } catch (err) {
      result("error", err.message, out);
      return;
    }
    table.textContent = "";
    if (!data.servers.length) table.appendChild(el("tr")).appendChild(el("td", "muted", "No MCP servers yet."));
    for (const server of data.servers) table.appendChild(row(server));
  };
  const row = (server) => {
    const tr = el("tr", "mcp-row");
    tr.dataset.name = server.name;
    tr.dataset.source = server.source;
    tr.dataset.state = (server.status && server.status.state) || "idle";
    const where = server.transport === "http" ? server.url : [server.command, ...(server.args || [])].join(" ");
    const label = server.read_only ? "from the configuration (read-only)" : (server.enabled ? "" : "disabled");
    const state = el("td", "mcp-state", stateText(server.status));
    if (server.status && server.status.error) state.appendChild(el("div", "mcp-error", server.status.error));
    tr.append(el("td", "mcp-name", server.name), el("td", "muted mcp-transport", server.transport),
              el("td", "muted mcp-where", where), state, el("td", "muted mcp-who", who(server)),
              el("td", "muted mcp-label", label));
    const actions = el("td", "row");
    const outcome = el("div", "result test-result");
    outcome.setAttribute("role", "status");
    const path = `/api/admin/mcp-servers/${encodeURIComponent(server.name)}`;
    actions.appendChild(button("Test", "test-mcp", async () => {
      result("", "Connecting…", outcome);
      try {
        const answer = await api("POST", `${path}/test`, {});
        if (!answer.ok) {
          result("error", `Failed: ${answer.error}`, outcome);
          return;
        }
        result("ok", `OK: ${answer.tools.length} tools in ${answer.latency_ms} ms.`, outcome);
        const list = el("ul", "mcp-tools");
        for (const tool of answer.tools) {
          const item = el("li", null);
          item.append(el("code", "mcp-tool-name", tool.name), document.createTextNode(tool.description ? ` — ${tool.description}` : ""));
          list.appendChild(item);
        }
        outcome.appendChild(list);
      } catch (err) {
        result("error", err.message, outcome);
      }
    }, `Test ${server.name}`));
    if (!server.read_only) {
      actions.append(
        button("Edit", "edit-mcp", () => form.edit(server), `Edit ${server.name}`),
        button("Remove", "remove-mcp", async () => {
          if (!confirm(`Remove the MCP server ${server.name}? Its process ends and the agent loses its tools.`)) return;
          try {
            await api("DELETE", path);
            result("ok", `${server.name} removed.`, out);
            if (form.editing() === server.name) form.reset();
            load();
          } catch (err) {
            result("error", err.message, out);
          }
        }, `Remove ${server.name}`));
    }
    actions.appendChild(outcome);
    tr.appendChild(actions);
    return tr;
  };
  box.append(table, refresh, form.node, out);
  load();
  return box;
}

/** "NAME=value" (env) or "Name: value" (headers) lines -> {name: value}; an empty value is null (keep it). */
function parseLines(text, separator) {
  const values = {};
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line) continue;
    const at = line.indexOf(separator);
    const name = (at < 0 ? line : line.slice(0, at)).trim();
    const value = at < 0 ? "" : line.slice(at + separator.length).trim();
    values[name] = value === "" ? null : value;
  }
  return values;
}

function list(text) {
  return text.split(",").map((item) => item.trim()).filter(Boolean);
}

function serverForm(out, onSaved) {
  const node = el("div", "mcp-form");
  const title = el("h3", null, "Add an MCP server");
  const name = input("text", "mcp_name");
  Object.assign(name, { maxLength: 24, placeholder: "a-z, 0-9, _ and - (tools are named mcp__<name>__<tool>)" });
  const transport = select("mcp_transport", [["stdio", "stdio (a command)"], ["http", "Streamable HTTP (a URL)"]], "stdio");
  const command = input("text", "mcp_command");
  command.placeholder = "/opt/mcp/.venv/bin/mcp-server-time";
  const args = el("textarea");
  args.name = "mcp_args";
  args.placeholder = "arguments, one per line";
  const env = el("textarea");
  env.name = "mcp_env";
  env.placeholder = "NAME=value, one per line";
  const url = input("text", "mcp_url");
  url.inputMode = "url";
  url.placeholder = "https://example.org/mcp";
  const headers = el("textarea");
  headers.name = "mcp_headers";
  headers.placeholder = "Name: value, one per line";
  const secretsNote = el("p", "muted mcp-secrets-note", "");
  const enabled = input("checkbox", "mcp_enabled");
  const sandbox = input("checkbox", "mcp_sandbox");
  const network = input("checkbox", "mcp_network");
  const timeout = input("number", "mcp_timeout");
  Object.assign(timeout, { min: "1", max: "3600", placeholder: "seconds (empty: the default)" });
  const approval = select("mcp_approval", [["ask", "Ask before every call"], ["auto", "Run calls without asking"]], "ask");
  const tools = input("text", "mcp_tools");
  tools.placeholder = "optional, comma-separated: only these tools";
  const users = input("text", "mcp_users");
  users.placeholder = "optional, comma-separated usernames or ids";
  const profiles = input("text", "mcp_profiles");
  profiles.placeholder = "optional, comma-separated agent profile ids";
  const stdioFields = [field("Command", command), field("Arguments", args), field("Environment", env),
                       field("Run in the sandbox", sandbox, true), field("Network in the sandbox", network, true)];
  const httpFields = [field("URL", url), field("Headers", headers)];
  let editing = null;
  let approvalTable = null;  // an approval given per tool (kept as it is unless the select changes)
  const shown = () => {
    for (const label of stdioFields) label.style.display = transport.value === "stdio" ? "" : "none";
    for (const label of httpFields) label.style.display = transport.value === "http" ? "" : "none";
  };
  transport.addEventListener("change", shown);
  approval.addEventListener("change", () => { approvalTable = null; });

  const values = () => {
    const body = {
      enabled: enabled.checked, timeout: timeout.value ? Number(timeout.value) : null,
      approval: approvalTable || approval.value,
      tools: tools.value.trim() ? list(tools.value) : null, users: list(users.value), profiles: list(profiles.value),
    };
    if (!editing) body.name = name.value.trim();
    if (transport.value === "stdio") {
      Object.assign(body, { command: command.value.trim(), url: null, sandbox: sandbox.checked, network: network.checked,
        args: args.value.split("\n").map((a) => a.trim()).filter(Boolean), env: parseLines(env.value, "="), headers: {} });
    } else {
      Object.assign(body, { url: url.value.trim(), command: null, args: [], env: {}, headers: parseLines(headers.value, ":") });
    }
    return body;
  };
  const reset = () => {
    editing = null;
    approvalTable = null;
    title.textContent = "Add an MCP server";
    name.disabled = false;
    for (const control of [name, command, args, env, url, headers, timeout, tools, users, profiles]) control.value = "";
    transport.value = "stdio";
    approval.value = "ask";
    enabled.checked = true;
    sandbox.checked = true;
    network.checked = false;
    secretsNote.textContent = "";
    cancel.hidden = true;
    shown();
  };
  const edit = (server) => {
    editing = server.name;
    title.textContent = `Edit ${server.name}`;
    name.value = server.name;
    name.disabled = true;
    transport.value = server.transport;
    command.value = server.command || "";
    args.value = (server.args || []).join("\n");
    env.value = Object.keys(server.env || {}).map((key) => `${key}=`).join("\n");
    url.value = server.url || "";
    headers.value = Object.keys(server.headers || {}).map((key) => `${key}: `).join("\n");
    const stored = [...Object.entries(server.env || {}), ...Object.entries(server.headers || {})];
    secretsNote.textContent = stored.length
      ? `Stored values are not shown (${stored.map(([key, s]) => `${key} ${hint(s)}`).join(", ")}): `
        + "leave one empty to keep it, or type a new one."
      : "";
    enabled.checked = server.enabled;
    sandbox.checked = server.sandbox;
    network.checked = server.network;
    timeout.value = server.timeout == null ? "" : String(server.timeout);
    approvalTable = typeof server.approval === "object" && server.approval ? server.approval : null;
    approval.value = approvalTable ? (approvalTable["*"] || "ask") : server.approval;
    tools.value = (server.tools || []).join(", ");
    users.value = (server.users || []).join(", ");
    profiles.value = (server.profiles || []).join(", ");
    cancel.hidden = false;
    shown();
    command.focus();
  };
  const save = button("Save MCP server", "primary save-mcp", async () => {
    try {
      const saved = editing
        ? await api("PATCH", `/api/admin/mcp-servers/${encodeURIComponent(editing)}`, values())
        : await api("POST", "/api/admin/mcp-servers", values());
      result("ok", `${saved.name} saved; new agent turns may use its tools.`, out);
      reset();
      onSaved();
    } catch (err) {
      result("error", err.message, out);
    }
  });
  const cancel = button("Cancel", "cancel-mcp", () => reset());
  const actions = el("div", "row");
  actions.append(save, cancel);
  node.append(title, field("Name", name), field("Transport", transport), ...stdioFields, ...httpFields, secretsNote,
              field("Enabled", enabled, true), field("Call timeout", timeout), field("Approval", approval),
              field("Tools", tools), field("Users", users), field("Agent profiles", profiles), actions);
  reset();
  return { node, edit, reset, editing: () => editing };
}
