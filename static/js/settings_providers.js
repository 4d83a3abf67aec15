// The admin's provider connections in the settings screen: the list (the configuration's ones
// read-only, labelled), an add/edit form, "Test" (the server sends one token) and Remove. Keys
// are never sent back by the server: the list and the form show only their last four characters.

import { api } from "./api.js";
import { button, el } from "./dom.js";
import { field, input, result, section, select } from "./settings_widgets.js";

const KINDS = [["openai", "OpenAI-compatible"], ["ollama", "Ollama"], ["anthropic", "Anthropic"]];
const URL_HINTS = {
  openai: "http://127.0.0.1:8080/v1 (empty: api.openai.com)",
  ollama: "http://127.0.0.1:11434",
  anthropic: "empty: api.anthropic.com",
};

function keyHint(provider) {
  if (!provider.api_key_set) return "no key";
  return provider.api_key_last4 ? `…${provider.api_key_last4}` : "set (short)";
}

function testOutcome(answer) {
  return answer.ok ? ["ok", `OK: ${answer.model} answered in ${answer.latency_ms} ms.`]
    : ["error", `Failed: ${answer.error}`];
}

/** The "Providers (admin)" section; options.onProvidersChanged() runs after every change. */
export function providers(options = {}) {
  const box = section("Providers (admin)", "settings-providers");
  box.appendChild(el("p", "muted", "Keys are stored in the server's database and never shown again after "
    + "saving; only their last four characters are. Providers from the environment or the TOML file are "
    + "read-only here."));
  const table = el("table", "providers-table");
  const out = el("div", "result provider-result");
  out.setAttribute("role", "status");
  const form = providerForm(out, () => { load(); options.onProvidersChanged?.(); });
  const load = async () => {
    let data;
    try {
      data = await api("GET", "/api/admin/providers");
    } catch (err) {
      result("error", err.message, out);
      return;
    }
    table.textContent = "";
    if (!data.providers.length) table.appendChild(el("tr")).appendChild(el("td", "muted", "No providers yet."));
    for (const provider of data.providers) table.appendChild(row(provider));
  };
  const row = (provider) => {
    const tr = el("tr", "provider-row");
    tr.dataset.name = provider.name;
    tr.dataset.source = provider.source;
    const label = provider.read_only ? "from the configuration (read-only)" : (provider.enabled ? "" : "disabled");
    tr.append(el("td", "provider-name", provider.name), el("td", "muted", provider.kind),
              el("td", "muted provider-url", provider.base_url || "(default address)"),
              el("td", "muted provider-key", keyHint(provider)), el("td", "muted provider-label", label));
    const actions = el("td", "row");
    const outcome = el("span", "result test-result");
    outcome.setAttribute("role", "status");
    const path = `/api/admin/providers/${encodeURIComponent(provider.id)}`;
    actions.appendChild(button("Test", "test-saved", async () => {
      result("", "Sending one token…", outcome);
      try {
        result(...testOutcome(await api("POST", `${path}/test`, {})), outcome);
      } catch (err) {
        result("error", err.message, outcome);
      }
    }, `Test ${provider.name}`));
    if (!provider.read_only) {
      actions.append(
        button("Edit", "edit-provider", () => form.edit(provider), `Edit ${provider.name}`),
        button("Remove", "remove-provider", async () => {
          if (!confirm(`Remove the provider ${provider.name}? Chats keep their replies; new turns cannot use it.`)) return;
          try {
            await api("DELETE", path);
            result("ok", `${provider.name} removed.`, out);
            if (form.editing() === provider.id) form.reset();
            load();
            options.onProvidersChanged?.();
          } catch (err) {
            result("error", err.message, out);
          }
        }, `Remove ${provider.name}`));
    }
    actions.appendChild(outcome);
    tr.appendChild(actions);
    return tr;
  };
  box.append(table, form.node, out);
  load();
  return box;
}

function providerForm(out, onSaved) {
  const node = el("div", "provider-form");
  const title = el("h3", null, "Add a provider");
  const kind = select("provider_kind", KINDS, "openai");
  const name = input("text", "provider_name");
  Object.assign(name, { maxLength: 64, placeholder: "letters, digits, _ . - (used as name/model)" });
  const url = input("text", "provider_base_url");
  url.inputMode = "url";
  const key = input("password", "provider_api_key");
  key.autocomplete = "new-password";
  const model = input("text", "provider_default_model");
  model.placeholder = "optional: the model new chats use";
  const models = input("text", "provider_models");
  models.placeholder = "optional, comma-separated: else the server is asked";
  const enabled = input("checkbox", "provider_enabled");
  const clearKey = input("checkbox", "provider_clear_key");
  const clearLabel = field("Remove the stored key", clearKey, true);
  let editing = null;
  const hints = () => { url.placeholder = URL_HINTS[kind.value] || ""; };
  kind.addEventListener("change", hints);

  const values = () => {
    const body = { kind: kind.value, name: name.value.trim(), base_url: url.value.trim() || null,
      default_model: model.value.trim() || null, enabled: enabled.checked,
      models: models.value.split(",").map((m) => m.trim()).filter(Boolean) };
    if (key.value) body.api_key = key.value;
    else if (editing && clearKey.checked) body.api_key = "";
    else if (!editing) body.api_key = "";
    return body;
  };
  const reset = () => {
    editing = null;
    title.textContent = "Add a provider";
    for (const control of [name, url, key, model, models]) control.value = "";
    kind.value = "openai";
    enabled.checked = true;
    clearKey.checked = false;
    clearLabel.style.display = "none";  // .settings label sets display: the hidden attribute would not hide it
    key.placeholder = "API key (if the server needs one)";
    cancel.hidden = true;
    hints();
  };
  const edit = (provider) => {
    editing = provider.id;
    title.textContent = `Edit ${provider.name}`;
    kind.value = provider.kind;
    name.value = provider.name;
    url.value = provider.base_url || "";
    key.value = "";
    key.placeholder = provider.api_key_set ? `${keyHint(provider)} (leave empty to keep it)` : "no key stored";
    model.value = provider.default_model || "";
    models.value = (provider.models || []).join(", ");
    enabled.checked = provider.enabled;
    clearKey.checked = false;
    clearLabel.style.display = provider.api_key_set ? "" : "none";
    cancel.hidden = false;
    hints();
    name.focus();
  };
  const save = button("Save provider", "primary save-provider", async () => {
    try {
      const saved = editing
        ? await api("PATCH", `/api/admin/providers/${encodeURIComponent(editing)}`, values())
        : await api("POST", "/api/admin/providers", values());
      result("ok", `${saved.name} saved; its models are offered now.`, out);
      reset();
      onSaved();
    } catch (err) {
      result("error", err.message, out);
    }
  });
  const test = button("Test", "test-provider", async () => {
    const body = values();
    if (!body.name) body.name = "test";
    if (editing) body.id = editing;
    result("", "Sending one token…", out);
    try {
      result(...testOutcome(await api("POST", "/api/admin/providers/test", body)), out);
    } catch (err) {
      result("error", err.message, out);
    }
  });
  const cancel = button("Cancel", "cancel-edit", () => reset());
  const actions = el("div", "row");
  actions.append(save, test, cancel);
  node.append(title, field("Kind", kind), field("Name", name), field("Base URL", url), field("API key", key),
              clearLabel, field("Default model", model), field("Models", models), field("Enabled", enabled, true),
              actions);
  reset();
  return { node, edit, reset, editing: () => editing };
}
