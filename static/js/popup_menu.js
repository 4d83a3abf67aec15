// A small popup menu (the chat's "⋯", a folder's "⋯"): a list of buttons under the button that opened
// it. Keyboard: focus goes to the first item; Arrow keys, Home and End move; Enter or Space picks;
// Escape or Tab closes and focus goes back to the opener. A click anywhere else closes it. One menu
// is open at a time. Labels go in as text.

import { el } from "./dom.js";

/** @typedef {{label: string, onSelect?: () => any, heading?: boolean, current?: boolean, className?: string}} MenuItem */

/** @type {{node: HTMLElement, opener: HTMLElement, close: (refocus?: boolean) => void} | null} */
let open = null;

/** Whether a menu is open (the sidebar waits with redrawing under it). */
export function menuOpen() {
  return open !== null;
}

/** Close the open menu, if any. */
export function closeMenu(refocus = false) {
  if (open) open.close(refocus);
}

/**
 * Open a menu of `items` below `opener` (toggles: a second click on the same opener closes it).
 * @param {HTMLElement} opener
 * @param {string} label the menu's accessible name
 * @param {MenuItem[]} items
 * @param {() => void} [onClose]
 */
export function openMenu(opener, label, items, onClose) {
  const same = open && open.opener === opener;
  closeMenu();
  if (same) return;
  const node = el("div", "popup-menu");
  node.setAttribute("role", "menu");
  node.setAttribute("aria-label", label);
  /** @type {HTMLButtonElement[]} */
  const buttons = [];
  for (const item of items) {
    if (item.heading) {
      node.appendChild(el("div", "menu-heading", item.label)).setAttribute("role", "presentation");
      continue;
    }
    const entry = /** @type {HTMLButtonElement} */ (el("button", `menu-item ${item.className || ""}`.trim(), item.label));
    entry.type = "button";
    entry.setAttribute("role", item.current === undefined ? "menuitem" : "menuitemradio");
    if (item.current !== undefined) entry.setAttribute("aria-checked", item.current ? "true" : "false");
    entry.tabIndex = -1;
    entry.addEventListener("click", () => {
      close(false);
      if (item.onSelect) item.onSelect();
    });
    buttons.push(entry);
    node.appendChild(entry);
  }
  const focusAt = (index) => buttons[(index + buttons.length) % buttons.length]?.focus();
  node.addEventListener("keydown", (e) => {
    const at = buttons.indexOf(/** @type {HTMLButtonElement} */ (document.activeElement));
    if (e.key === "ArrowDown") focusAt(at + 1);
    else if (e.key === "ArrowUp") focusAt(at - 1);
    else if (e.key === "Home") focusAt(0);
    else if (e.key === "End") focusAt(buttons.length - 1);
    else if (e.key === "Escape") close(true);
    else if (e.key === "Tab") close(true);
    else return;
    e.preventDefault();
    e.stopPropagation();
  });
  const outside = (e) => {
    if (!node.contains(/** @type {Node} */ (e.target)) && !opener.contains(/** @type {Node} */ (e.target))) close(false);
  };
  function close(refocus) {
    if (!open || open.node !== node) return;
    open = null;
    node.remove();
    document.removeEventListener("pointerdown", outside, true);
    opener.setAttribute("aria-expanded", "false");
    if (refocus && opener.isConnected) opener.focus();
    if (onClose) onClose();
  }
  open = { node, opener, close };
  opener.setAttribute("aria-haspopup", "menu");
  opener.setAttribute("aria-expanded", "true");
  document.body.appendChild(node);
  place(node, opener);
  document.addEventListener("pointerdown", outside, true);
  focusAt(0);
}

/** Below the opener, kept inside the window (above it when there is no room below). */
function place(node, opener) {
  const box = opener.getBoundingClientRect();
  const width = node.offsetWidth;
  const height = node.offsetHeight;
  const left = Math.max(4, Math.min(box.right - width, window.innerWidth - width - 4));
  const below = box.bottom + 4;
  const top = below + height > window.innerHeight - 4 ? Math.max(4, box.top - height - 4) : below;
  node.style.left = `${left}px`;
  node.style.top = `${top}px`;
}
