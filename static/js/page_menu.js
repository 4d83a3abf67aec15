// The header's one overflow menu ("⋯"): the open chat's actions (rename, pin, archive, share, move to
// a folder, delete: chat_menu.js and sidebar.js), export as .md or .json, the workflow to answer with
// and "Workflows…", and the research job list. It opens with popup_menu.js, so it is keyboard-usable
// like the sidebar's menus. The page (chat.js) hands it what it reads and calls.

import { chatMenuItems } from "./chat_menu.js";

/**
 * @typedef {import("./chat_menu.js").Session} Session
 * @typedef {{
 *   session: Session | null,
 *   chatActions: import("./chat_menu.js").ChatActions,
 *   rename: (session: Session) => any,
 *   remove: (session: Session) => any,
 *   exportLinks: {md: HTMLAnchorElement, json: HTMLAnchorElement},
 *   workflows: {list: {id: string, name: string}[], value: () => string, pick: (id: string) => void, openScreen: () => any},
 *   openResearchList: () => any,
 * }} PageMenuHooks
 */

/**
 * The menu's items (the chat's own only when a chat is open).
 * @param {PageMenuHooks} hooks
 * @returns {import("./popup_menu.js").MenuItem[]}
 */
export function pageMenuItems(hooks) {
  /** @type {import("./popup_menu.js").MenuItem[]} */
  const items = [];
  const { session, workflows } = hooks;
  if (session) {
    items.push({ label: "This chat", heading: true },
               { label: "Rename…", className: "menu-rename", onSelect: () => hooks.rename(session) },
               ...chatMenuItems(session, hooks.chatActions),
               { label: "Delete…", className: "menu-delete", onSelect: () => hooks.remove(session) },
               { label: "Export", heading: true },
               { label: "Export .md", className: "menu-export-md", onSelect: () => hooks.exportLinks.md.click() },
               { label: "Export .json", className: "menu-export-json", onSelect: () => hooks.exportLinks.json.click() });
  }
  items.push({ label: "Workflow", heading: true });
  for (const workflow of workflows.list) {
    items.push({ label: workflow.name, className: "menu-workflow", current: workflows.value() === workflow.id,
                 onSelect: () => workflows.pick(workflow.id) });
  }
  items.push({ label: "Workflows…", className: "menu-workflows", onSelect: () => workflows.openScreen() },
             { label: "Research jobs", className: "menu-research-jobs", onSelect: () => hooks.openResearchList() });
  return items;
}
