// The settings screen's "Shared links" (GET /api/shares, DELETE /api/shares/{id}): every link the user
// made of a chat, with when, how many messages it holds, Copy and Revoke. A revoked link answers 404
// at once.

import { api } from "./api.js";
import { copyText } from "./clipboard.js";
import { button, el } from "./dom.js";
import { result, section } from "./settings_widgets.js";

/** The section, filled from the server (and again after each Revoke). */
export function shares() {
  const box = section("Shared links", "settings-shares");
  box.appendChild(el("p", "muted",
                     "Anyone with a link can read that chat as it was when you shared it. Revoke a link to stop it."));
  const table = el("table");
  const out = el("div", "result");
  out.setAttribute("role", "status");
  const load = async () => {
    let data;
    try {
      data = await api("GET", "/api/shares");
    } catch (err) {
      result("error", err.message, out);
      return;
    }
    table.textContent = "";
    if (!data.shares.length) table.appendChild(el("tr")).appendChild(el("td", "muted", "No shared links."));
    for (const share of data.shares) {
      const url = location.origin + share.path;
      const row = el("tr", "share-row");
      row.dataset.shareId = share.id;
      const link = /** @type {HTMLAnchorElement} */ (el("a", null, share.title));
      link.href = url;
      link.target = "_blank";
      link.rel = "noopener noreferrer";
      const when = new Date(share.created_at * 1000).toLocaleString();
      const title = el("td");
      title.appendChild(link);
      row.append(title, el("td", "muted", `${when} · ${share.message_count} messages`));
      const cell = el("td", "row");
      cell.append(
        button("Copy", "copy-share", async () => {
          result("ok", (await copyText(url)) ? "Link copied." : url, out);
        }, `Copy the link to ${share.title}`),
        button("Revoke", "revoke-share", async () => {
          try {
            await api("DELETE", `/api/shares/${encodeURIComponent(share.id)}`);
            result("ok", `The link to "${share.title}" is revoked.`, out);
          } catch (err) {
            result("error", err.message, out);
          }
          load();
        }, `Revoke the link to ${share.title}`),
      );
      row.appendChild(cell);
      table.appendChild(row);
    }
  };
  box.append(table, out);
  load();
  return box;
}
