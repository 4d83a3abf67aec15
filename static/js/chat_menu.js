// A chat's overflow menu (the sidebar row's "⋯" and the header's): pin, archive or restore, share a
// link, move to a folder (or out of one, or into a new one). The actions are the sidebar's
// (sidebar.js), which writes through PATCH /api/sessions/{id} and redraws from the server.

import { api } from "./api.js";
import { copyText } from "./clipboard.js";

/**
 * @typedef {{id: string, title: string, pinned?: boolean, archived?: boolean, folder_id?: string | null}} Session
 * @typedef {{
 *   folders: () => {id: string, name: string}[],
 *   update: (session: Session, changes: Record<string, any>, done?: string) => any,
 *   newFolder: (session: Session) => any,
 *   toast: (text: string) => void,
 * }} ChatActions
 */

/**
 * The menu's items for `session`.
 * @param {Session} session
 * @param {ChatActions} actions
 * @returns {import("./popup_menu.js").MenuItem[]}
 */
export function chatMenuItems(session, actions) {
  /** @type {import("./popup_menu.js").MenuItem[]} */
  const items = [
    session.pinned
      ? { label: "Unpin", className: "menu-unpin", onSelect: () => actions.update(session, { pinned: false }) }
      : { label: "Pin", className: "menu-pin", onSelect: () => actions.update(session, { pinned: true }) },
    session.archived
      ? { label: "Restore", className: "menu-restore",
          onSelect: () => actions.update(session, { archived: false }, `Restored "${session.title}".`) }
      : { label: "Archive", className: "menu-archive",
          onSelect: () => actions.update(session, { archived: true }, `Archived "${session.title}": see Archived.`) },
    { label: "Share link", className: "menu-share", onSelect: () => shareChat(session, actions.toast) },
    { label: "Move to folder", heading: true },
  ];
  for (const folder of actions.folders()) {
    const here = session.folder_id === folder.id;
    items.push({
      label: folder.name, className: "menu-folder", current: here,
      onSelect: () => { if (!here) actions.update(session, { folder_id: folder.id }, `Moved to "${folder.name}".`); },
    });
  }
  if (session.folder_id) {
    items.push({ label: "No folder", className: "menu-no-folder",
                 onSelect: () => actions.update(session, { folder_id: null }, "Moved out of its folder.") });
  }
  items.push({ label: "New folder…", className: "menu-new-folder", onSelect: () => actions.newFolder(session) });
  return items;
}

/** Make a share link of the chat (a snapshot of it now) and copy it; the toast shows it too. */
export async function shareChat(session, toast) {
  let share;
  try {
    share = await api("POST", `/api/sessions/${encodeURIComponent(session.id)}/share`);
  } catch (err) {
    toast(`Could not share: ${err.message}`);
    return null;
  }
  const url = location.origin + share.path; // the address this page was reached at, whatever the proxy
  const copied = await copyText(url);
  toast(copied ? `Share link copied: ${url}` : `Share link: ${url}`);
  return url;
}
