// The settings screen (in the page's dialog): the user's preferences, saved prompts
// (settings_prompts.js), agents (settings_agents.js), rated replies (settings_ratings.js), password, API
// tokens, shared links (settings_shares.js) and the streaming self-test; for an admin also accounts,
// sign-up, ratings per model, the provider connections (settings_providers.js) and the MCP servers
// (settings_mcp.js). Every change goes through the JSON API and its answer (or error) is shown next to
// the control that made it.

import { api } from "./api.js";
import { button, el } from "./dom.js";
import { runStreamCheck } from "./selftest.js";
import { agents } from "./settings_agents.js";
import { prompts } from "./settings_prompts.js";
import { mcpServers } from "./settings_mcp.js";
import { providers } from "./settings_providers.js";
import { ratings, ratingsPerModel } from "./settings_ratings.js";
import { shares } from "./settings_shares.js";
import { field, input, result, section, select } from "./settings_widgets.js";

/**
 * Options: {status (auth status), models [ids], onSaved(settings), onProvidersChanged(), openSession(id),
 * closeModal(), section (the id of a section to open at, e.g. "settings-agents")}.
 */
export async function openSettings(openModal, options) {
  const root = el("div", "settings");
  root.id = "settings";
  const data = await api("GET", "/api/user/settings");
  root.append(preferences(data.settings, options), prompts(), agents(options), ratings(options));
  const user = options.status && options.status.user;
  if (user) {
    if (options.status.mode === "password") root.appendChild(password());
    root.appendChild(tokens());
  }
  root.appendChild(shares()); // share links of chats (settings_shares.js)
  root.appendChild(streamCheck(options));
  if (user && user.is_admin) root.append(admin(user), ratingsPerModel(), providers(options), mcpServers());
  else if (!user && options.status && options.status.mode === "none") {
    root.append(ratingsPerModel(), providers(options), mcpServers()); // the single-user owner is the admin
  }
  openModal("Settings", root);
  const target = options.section && root.querySelector(`#${CSS.escape(options.section)}`);
  if (target) {
    target.scrollIntoView({ block: "start" });
    const heading = target.querySelector("h3");
    heading.tabIndex = -1;
    heading.focus();
  }
}

function preferences(settings, options) {
  const box = section("Preferences", "settings-preferences");
  const models = [["", "(the server's default)"], ...options.models.map((m) => [m, m])];
  if (settings.default_model && !options.models.includes(settings.default_model)) {
    models.push([settings.default_model, `${settings.default_model} (unavailable)`]);
  }
  const model = select("default_model", models, settings.default_model || "");
  const mode = select("default_mode", [["chat", "Chat"], ["agent", "Agent"]], settings.default_mode);
  const prompt = el("textarea");
  prompt.name = "system_prompt";
  prompt.value = settings.system_prompt || "";
  prompt.placeholder = "Sent to the model before every conversation";
  const temperature = input("number", "temperature", settings.temperature ?? "");
  Object.assign(temperature, { min: "0", max: "2", step: "0.1", placeholder: "model default" });
  const theme = select("theme", [["auto", "Follow the system"], ["light", "Light"], ["dark", "Dark"]], settings.theme);
  const memory = input("checkbox", "memory_enabled");
  memory.checked = !!settings.memory_enabled;
  const out = el("span", "result");
  out.setAttribute("role", "status");
  const save = button("Save preferences", "primary save-preferences", async () => {
    const body = {
      default_model: model.value || null, default_mode: mode.value, system_prompt: prompt.value || null,
      temperature: temperature.value === "" ? null : Number(temperature.value), theme: theme.value,
      memory_enabled: memory.checked,
    };
    try {
      const saved = await api("PATCH", "/api/user/settings", body);
      result("ok", "Saved.", out);
      options.onSaved?.(saved.settings);
    } catch (err) {
      result("error", err.message, out);
    }
  });
  box.append(field("Default model", model), field("Default mode", mode), field("Personal system prompt", prompt),
             field("Temperature (0-2, empty for the model's default)", temperature), field("Theme", theme),
             field("Let the assistant use memories", memory, true), el("div", "row"));
  box.lastChild.append(save, out);
  return box;
}

function password() {
  const box = section("Password", "settings-password");
  const current = input("password", "current_password");
  const next = input("password", "new_password");
  current.autocomplete = "current-password";
  next.autocomplete = "new-password";
  const keep = input("checkbox", "keep_tokens"); // unchecked: a new password revokes the account's API tokens
  const out = el("span", "result");
  const change = button("Change password", "change-password", async () => {
    try {
      const answer = await api("POST", "/api/auth/password",
                               { current_password: current.value, new_password: next.value, keep_tokens: keep.checked });
      current.value = next.value = "";
      const revoked = answer.tokens_revoked ? ` ${answer.tokens_revoked} API token(s) revoked.` : "";
      result("ok", `Password changed; other browsers are signed out.${revoked}`, out);
    } catch (err) {
      result("error", err.message, out);
    }
  });
  box.append(field("Current password", current), field("New password (8 characters or more)", next),
             field(" Keep my API tokens (they are revoked otherwise)", keep, true), el("div", "row"));
  box.lastChild.append(change, out);
  return box;
}

function tokens() {
  const box = section("API tokens", "settings-tokens");
  const table = el("table");
  const name = input("text", "token_name");
  name.placeholder = "What the token is for";
  name.maxLength = 100;
  const out = el("div", "result");
  const load = async () => {
    table.textContent = "";
    let data;
    try {
      data = await api("GET", "/api/auth/tokens");
    } catch (err) {
      result("error", err.message, out);
      return;
    }
    if (!data.tokens.length) table.appendChild(el("tr")).appendChild(el("td", "muted", "No tokens yet."));
    for (const token of data.tokens) {
      const row = el("tr", "token-row");
      row.dataset.tokenId = token.id;
      row.append(el("td", null, token.name), el("td", "muted", `${token.prefix}…`),
                 el("td", "muted", token.last_used_at ? "used" : "never used"));
      const cell = el("td");
      cell.appendChild(button("Revoke", "revoke", async () => {
        try {
          await api("DELETE", `/api/auth/tokens/${encodeURIComponent(token.id)}`);
          load();
        } catch (err) {
          result("error", err.message, out);
        }
      }, `Revoke ${token.name}`));
      row.appendChild(cell);
      table.appendChild(row);
    }
  };
  const create = button("Create token", "create-token", async () => {
    try {
      const made = await api("POST", "/api/auth/tokens", { name: name.value });
      name.value = "";
      out.dataset.kind = "ok";
      out.textContent = "Copy it now; it is not shown again: ";
      out.appendChild(el("div", "secret", made.token));
      load();
    } catch (err) {
      result("error", err.message, out);
    }
  });
  box.append(table, el("div", "row"), out);
  box.children[2].append(name, create);
  load();
  return box;
}

function streamCheck(options) {
  const box = section("Streaming check", "settings-stream");
  box.appendChild(el("p", "muted", "Checks that replies reach this browser as they are written, not in one burst."));
  const out = el("div", "result");
  out.setAttribute("role", "status");
  const run = button("Run the check", "run-stream-check", async () => {
    run.disabled = true;
    result("", "Checking…", out);
    const verdict = await runStreamCheck();
    run.disabled = false;
    result(verdict.verdict === "ok" ? "ok" : "error", verdict.message, out);
    options.onStreamCheck?.(verdict);
  });
  box.append(run, out);
  return box;
}

function admin(me) {
  const box = section("Accounts (admin)", "settings-admin");
  const out = el("div", "result");
  const table = el("table");
  const signup = input("checkbox", "allow_signup");
  signup.addEventListener("change", async () => {
    try {
      const saved = await api("POST", "/api/auth/settings", { allow_signup: signup.checked });
      signup.checked = saved.allow_signup;
      result("ok", saved.allow_signup ? "Sign-up is open." : "Sign-up is off.", out);
    } catch (err) {
      result("error", err.message, out);
    }
  });
  const act = async (method, url, body, done) => {
    try {
      await api(method, url, body);
      result("ok", done, out);
      load();
    } catch (err) {
      result("error", err.message, out);
    }
  };
  const load = async () => {
    table.textContent = "";
    const [users, settings] = await Promise.all([api("GET", "/api/admin/users"), api("GET", "/api/auth/settings")]);
    signup.checked = settings.allow_signup;
    for (const user of users.users) {
      const row = el("tr", "user-row");
      row.dataset.username = user.username;
      const state = [user.is_admin ? "admin" : "user", user.disabled ? "disabled" : ""].filter(Boolean).join(", ");
      row.append(el("td", null, user.username), el("td", "muted user-state", state));
      const cell = el("td", "row");
      if (user.id !== me.id) {
        const path = `/api/admin/users/${encodeURIComponent(user.id)}`;
        cell.append(
          button(user.is_admin ? "Remove admin" : "Make admin", "toggle-admin",
                 () => act("PATCH", path, { is_admin: !user.is_admin }, `${user.username} updated.`)),
          button(user.disabled ? "Enable" : "Disable", "toggle-disabled",
                 () => act("PATCH", path, { disabled: !user.disabled },
                           `${user.username} ${user.disabled ? "enabled" : "disabled and signed out"}.`)),
          button("Reset password", "reset-password", () => {
            const secret = prompt(`New password for ${user.username} (8 characters or more):`);
            if (secret) act("POST", `${path}/password`, { new_password: secret }, `Password of ${user.username} reset.`);
          }));
      } else {
        cell.appendChild(el("span", "muted", "you"));
      }
      row.appendChild(cell);
      table.appendChild(row);
    }
  };
  const username = input("text", "new_username");
  const secret = input("password", "new_user_password");
  const isAdmin = input("checkbox", "new_user_admin");
  const create = button("Create account", "create-user", () => act("POST", "/api/auth/users",
    { username: username.value, password: secret.value, is_admin: isAdmin.checked }, `Account ${username.value} created.`)
    .then(() => { username.value = secret.value = ""; isAdmin.checked = false; }));
  box.append(field("Anyone may sign up", signup, true), table, el("h3", null, "New account"),
             field("Username", username), field("Password", secret), field("Admin", isAdmin, true), create, out);
  load().catch((err) => result("error", err.message, out));
  return box;
}
