// The `ui_control` actions a model may ask the page for (docs/protocol-frontend.md); unknown ones are ignored.

/**
 * Apply one `ui_control` action through the page's own functions.
 * @param {{action?: string, theme?: string, mode?: string, model?: string, message?: string, text?: string,
 *          session_id?: string}} data
 * @param {{setMode: (mode: string) => void, modelPicker: HTMLSelectElement, input: HTMLTextAreaElement,
 *          toast: (text: string) => void, openSession: (id: string) => unknown}} page
 */
export function applyUiControl(data, page) {
  switch (data.action) {
    case "set_theme":
      window.odysseusTheme.set(data.theme === "auto" ? "" : data.theme);
      break;
    case "set_mode":
      page.setMode(data.mode);
      break;
    case "select_model":
      if ([...page.modelPicker.options].some((o) => o.value === data.model)) page.modelPicker.value = data.model;
      break;
    case "notify":
      page.toast(String(data.message || ""));
      break;
    case "prefill":
      page.input.value = String(data.text || "");
      page.input.focus();
      break;
    case "open_session":
      if (data.session_id) page.openSession(String(data.session_id));
      break;
    default:
      console.debug("ignored ui_control", data);
  }
}
