// The in-place edit form of a message: Save (PATCH the text), Cancel / Escape, and for a user
// message "Save & send" (the edited text continues the chat as a new branch: branches.js).
import { api } from "./api.js";
import { UserView } from "./render.js";

/**
 * Open the edit form under `view` (a UserView or ReplyView); a second call while it is open does nothing.
 * @param {any} view
 * @param {{resend: (view: any, text: string) => boolean, toast: (text: string) => void}} actions
 *   `resend` answers true when the edited text was sent (the form then closes)
 */
export function openEditForm(view, { resend, toast }) {
  if (view.editing) return;
  view.editing = true;
  const form = document.createElement("form");
  form.className = "edit-form";
  const area = document.createElement("textarea");
  area.value = view.text;
  area.setAttribute("aria-label", "Edit message");
  const save = Object.assign(document.createElement("button"), { type: "submit", textContent: "Save" });
  const cancel = Object.assign(document.createElement("button"), { type: "button", textContent: "Cancel" });
  form.append(area, save, cancel);
  const close = () => { form.remove(); view.body.hidden = false; view.editing = false; };
  if (view instanceof UserView) {
    const again = Object.assign(document.createElement("button"), { type: "button", textContent: "Save & send",
                                                                  className: "resend" });
    again.addEventListener("click", () => { if (area.value.trim() && resend(view, area.value)) close(); });
    form.insertBefore(again, cancel);
  }
  view.body.hidden = true;
  view.body.after(form);
  area.focus();
  cancel.addEventListener("click", close);
  form.addEventListener("keydown", (e) => { if (e.key === "Escape") close(); });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const saved = await api("PATCH", `/api/messages/${view.id}`, { content: area.value });
      view.setText(saved.content ?? area.value);
      close();
    } catch (err) {
      toast(`Could not save: ${err.message}`);
    }
  });
}
