// Settings → Ratings: the replies the user rated (GET /api/ratings), each opening its chat; and for an
// admin, every user's ratings counted per model (GET /api/admin/ratings).

import { api } from "./api.js";
import { button, el } from "./dom.js";
import { result, section } from "./settings_widgets.js";

/** @param {{openSession?: (id: string) => unknown, closeModal?: () => void}} options */
export function ratings(options) {
  const box = section("Your ratings", "settings-ratings");
  const table = el("table", "library-list rating-list");
  const out = el("div", "result");
  box.append(table, out);
  api("GET", "/api/ratings?limit=50").then((data) => {
    if (!data.ratings.length) {
      table.appendChild(el("tr")).appendChild(el("td", "muted", "No rated replies yet: rate a reply with the thumbs under it."));
    }
    for (const rating of data.ratings) {
      const row = el("tr", "rating-row");
      row.dataset.messageId = String(rating.message_id);
      const open = el("td");
      open.appendChild(button(rating.session_title || "Chat", "link open-rated", () => {
        options.closeModal?.();
        options.openSession?.(rating.session_id);
      }, `Open the chat ${rating.session_title || ""}`.trim()));
      const good = rating.value === 1;
      row.append(el("td", `rating-value ${good ? "up" : "down"}`, good ? "good" : "bad"), open,
                 el("td", "muted", rating.model), el("td", "rating-row-comment", rating.comment || ""));
      table.appendChild(row);
    }
  }).catch((err) => result("error", err.message, out));
  return box;
}

/** The admin's view: up and down per model. */
export function ratingsPerModel() {
  const box = section("Ratings per model (admin)", "settings-admin-ratings");
  const table = el("table", "ratings-per-model");
  const out = el("div", "result");
  box.append(table, out);
  api("GET", "/api/admin/ratings").then((data) => {
    const head = el("tr");
    head.append(el("th", null, "Model"), el("th", null, "Good"), el("th", null, "Bad"), el("th", null, "Rated"));
    table.appendChild(head);
    if (!data.models.length) table.appendChild(el("tr")).appendChild(el("td", "muted", "No ratings yet."));
    for (const entry of data.models) {
      const row = el("tr", "model-rating");
      row.dataset.model = entry.model;
      row.append(el("td", null, entry.model), el("td", null, entry.up), el("td", null, entry.down),
                 el("td", null, entry.total));
      table.appendChild(row);
    }
  }).catch((err) => result("error", err.message, out));
  return box;
}
