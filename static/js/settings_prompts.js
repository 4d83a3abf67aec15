// Settings → Prompts: the user's prompt library (GET/POST /api/prompts, PATCH/DELETE /api/prompts/{id}).
// Each prompt has a title, a /command (typed at the start of the message box to insert it, see
// prompt_menu.js) and a content whose {{variables}} are asked for when it is inserted. The list is
// redrawn from the server after every change; the server's error (a taken command: 409) is shown.

import { api } from "./api.js";
import { button, el } from "./dom.js";
import { field, input, result, section } from "./settings_widgets.js";

export function prompts() {
  const box = section("Prompts", "settings-prompts");
  box.appendChild(el("p", "muted",
    "Saved prompts: type / and the command at the start of the message box to insert one. " +
    "Write {{name}} for a blank you fill in when you insert it."));
  const table = el("table", "library-list prompt-list");
  const out = el("div", "result");
  out.setAttribute("role", "status");
  const form = el("form", "library-form prompt-form");
  const heading = el("h4", null, "New prompt");
  const title = input("text", "prompt_title");
  title.maxLength = 200;
  const command = input("text", "prompt_command");
  command.maxLength = 33;
  command.placeholder = "summarize";
  command.autocapitalize = "off";
  command.spellcheck = false;
  const content = el("textarea");
  content.name = "prompt_content";
  content.maxLength = 20000;
  content.placeholder = "Summarize this in three bullet points:\n\n{{text}}";
  const save = el("button", "primary save-prompt", "Save prompt");
  save.type = "submit";
  let editing = null; // the prompt being edited, or null for a new one
  const cancel = button("Cancel", "cancel-prompt", () => reset());
  cancel.hidden = true;
  const actions = el("div", "row");
  actions.append(save, cancel);
  form.append(heading, field("Title", title), field("Command (letters, digits, - and _; without the /)", command),
              field("Prompt", content), actions);

  function reset() {
    editing = null;
    heading.textContent = "New prompt";
    title.value = command.value = content.value = "";
    cancel.hidden = true;
  }

  function edit(prompt) {
    editing = prompt;
    heading.textContent = `Edit /${prompt.command}`;
    title.value = prompt.title;
    command.value = prompt.command;
    content.value = prompt.content;
    cancel.hidden = false;
    title.focus();
  }

  async function load() {
    let data;
    try {
      data = await api("GET", "/api/prompts");
    } catch (err) {
      result("error", err.message, out);
      return;
    }
    table.textContent = "";
    if (!data.prompts.length) table.appendChild(el("tr")).appendChild(el("td", "muted", "No saved prompts yet."));
    for (const prompt of data.prompts) {
      const row = el("tr", "prompt-row");
      row.dataset.promptId = prompt.id;
      row.dataset.command = prompt.command;
      const actionsCell = el("td", "actions");
      actionsCell.append(
        button("Edit", "edit-prompt", () => edit(prompt), `Edit /${prompt.command}`),
        button("Delete", "delete-prompt", async () => {
          if (!confirm(`Delete the prompt /${prompt.command}?`)) return;
          try {
            await api("DELETE", `/api/prompts/${encodeURIComponent(prompt.id)}`);
            if (editing && editing.id === prompt.id) reset();
            result("ok", `/${prompt.command} deleted.`, out);
            load();
          } catch (err) {
            result("error", err.message, out);
          }
        }, `Delete /${prompt.command}`));
      row.append(el("td", null, `/${prompt.command}`), el("td", "prompt-row-title", prompt.title), actionsCell);
      table.appendChild(row);
    }
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { title: title.value, command: command.value, content: content.value };
    try {
      const saved = editing
        ? await api("PATCH", `/api/prompts/${encodeURIComponent(editing.id)}`, body)
        : await api("POST", "/api/prompts", body);
      result("ok", `/${saved.command} saved.`, out);
      reset();
      load();
    } catch (err) {
      result("error", err.message, out);
    }
  });
  box.append(table, form, out);
  load();
  return box;
}
