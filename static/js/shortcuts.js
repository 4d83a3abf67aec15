// Keyboard shortcuts of the page: Esc stops the reply being written, `?` lists the shortcuts.
// Keys typed into a text field are the field's own (only Esc reaches us from there, when the field
// did not use it itself: the search box and the rename field clear or cancel with it).

import { el } from "./dom.js";

/** What the page offers, shown by `?` (key, what it does). */
export const SHORTCUTS = [
  ["Enter", "send the message (in the message box)"],
  ["Shift + Enter", "a new line in the message box"],
  ["Esc", "stop the reply being written"],
  ["?", "this list"],
];

/**
 * @param {{running: () => boolean, stop: () => void, openModal: (title: string, node: HTMLElement) => void,
 *          modal: HTMLDialogElement}} hooks
 */
export function installShortcuts({ running, stop, openModal, modal }) {
  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.isComposing || event.ctrlKey || event.metaKey || event.altKey) return;
    if (modal.open) return; // a dialog's own keys (Esc closes it)
    if (event.key === "Escape" && running()) {
      event.preventDefault();
      stop();
      return;
    }
    if (event.key === "?" && !typing(event.target)) {
      event.preventDefault();
      openModal("Keyboard shortcuts", shortcutList());
    }
  });
}

/** Whether `target` takes text (then `?` is a character, not a shortcut). */
function typing(target) {
  if (!(target instanceof HTMLElement)) return false;
  return target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName);
}

function shortcutList() {
  const list = el("dl", "shortcuts");
  for (const [key, what] of SHORTCUTS) {
    const term = el("dt");
    term.appendChild(el("kbd", null, key));
    list.append(term, el("dd", null, what));
  }
  return list;
}
