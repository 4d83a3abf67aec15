// A reply's rating: thumbs up or down under a saved reply, with an optional comment. Pressing the
// pressed thumb again removes the rating. The part never talks to the network itself: it asks the
// page through `ctx.onRate(view, rating | null)` (PUT or DELETE /api/messages/{id}/rating) and shows
// what the server answered, so the state after a reload (from the message's `rating`) is the same.

import { button, el } from "./dom.js";

const MAX_COMMENT = 2000; // odysseus/store/ratings.py
/** Thumb outlines (24×24, stroked), drawn as SVG so they show without an emoji font. */
const THUMB_UP = "M14 9V5a3 3 0 0 0-3-3l-4 9v11h11.28a2 2 0 0 0 2-1.7l1.38-9a2 2 0 0 0-2-2.3zM7 22H4a2 2 0 0 1-2-2v-7a2 2 0 0 1 2-2h3";
const THUMB_DOWN = "M10 15v4a3 3 0 0 0 3 3l4-9V2H5.72a2 2 0 0 0-2 1.7l-1.38 9a2 2 0 0 0 2 2.3zm7-13h2.67A2.31 2.31 0 0 1 22 4v7a2.31 2.31 0 0 1-2.33 2H17";

/**
 * A thumb button: the icon, its name as the accessible label and tooltip.
 * @param {string} path
 * @param {string} className
 * @param {string} label
 * @param {() => unknown} onClick
 */
function thumb(path, className, label, onClick) {
  const node = button("", className, onClick, label);
  node.title = label;
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  for (const [name, value] of Object.entries({ width: "15", height: "15", viewBox: "0 0 24 24", fill: "none",
    stroke: "currentColor", "stroke-width": "2", "stroke-linecap": "round", "stroke-linejoin": "round",
    "aria-hidden": "true" })) svg.setAttribute(name, value);
  const line = document.createElementNS("http://www.w3.org/2000/svg", "path");
  line.setAttribute("d", path);
  svg.appendChild(line);
  node.appendChild(svg);
  return node;
}

/**
 * A reply's rating as the server keeps it.
 * @typedef {{value: number, comment?: string | null, rated_at?: number | null}} Rating
 */

/**
 * What the part needs of its reply view.
 * @typedef {object} RatedView
 * @property {number | null} id the saved message's id (null until the reply is saved)
 * @property {HTMLElement} el the reply's element
 * @property {{onRate?: (view: any, rating: {value: number, comment: string | null} | null) => Promise<{rating: Rating | null}>}} ctx
 */

export class RatingPart {
  /** @param {RatedView} view */
  constructor(view) {
    this.view = view;
    /** @type {Rating | null} */
    this.rating = null;
    this.box = el("div", "msg-rating");
    this.box.setAttribute("role", "group");
    this.box.setAttribute("aria-label", "Rate this reply");
    this.box.hidden = true;
    this.up = thumb(THUMB_UP, "rate-up", "Good reply", () => this.press(1));
    this.down = thumb(THUMB_DOWN, "rate-down", "Bad reply", () => this.press(-1));
    this.commentText = el("span", "rating-comment");
    this.commentButton = button("Comment", "rating-comment-edit", () => this.openForm());
    this.error = el("span", "rating-error");
    this.error.setAttribute("role", "status");
    /** @type {HTMLFormElement | null} */
    this.form = null;
    this.box.append(this.up, this.down, this.commentText, this.commentButton, this.error);
    this.draw();
  }

  /** Offer the thumbs once the reply is saved (and the page can rate it). */
  enable() {
    this.box.hidden = !(this.view.id !== null && this.view.ctx.onRate);
  }

  /**
   * Show a saved rating (from the messages list), or none.
   * @param {Rating | null | undefined} rating
   */
  restore(rating) {
    this.rating = rating && (rating.value === 1 || rating.value === -1) ? rating : null;
    this.draw();
  }

  draw() {
    const value = this.rating ? this.rating.value : 0;
    this.up.setAttribute("aria-pressed", value === 1 ? "true" : "false");
    this.down.setAttribute("aria-pressed", value === -1 ? "true" : "false");
    const comment = (this.rating && this.rating.comment) || "";
    this.commentText.textContent = comment ? `“${comment}”` : "";
    this.commentButton.hidden = !this.rating || this.form !== null;
    this.commentButton.textContent = comment ? "Edit comment" : "Add a comment";
    if (this.rating) this.box.dataset.rated = value === 1 ? "up" : "down";
    else delete this.box.dataset.rated;
  }

  /**
   * A thumb was pressed: rate with it (keeping the comment), or remove the rating when it was pressed already.
   * @param {number} value
   */
  press(value) {
    if (this.rating && this.rating.value === value) return this.save(null);
    return this.save({ value, comment: (this.rating && this.rating.comment) || null });
  }

  /**
   * Send the new rating (null removes it) and show what the server kept.
   * @param {{value: number, comment: string | null} | null} rating
   */
  async save(rating) {
    const rate = this.view.ctx.onRate;
    if (!rate) return false;
    this.error.textContent = "";
    try {
      const answer = await rate(this.view, rating);
      this.rating = answer.rating;
    } catch (err) {
      this.error.textContent = `Not saved: ${err instanceof Error ? err.message : String(err)}`;
      return false;
    }
    if (!this.rating) this.closeForm();
    this.draw();
    return true;
  }

  /** The comment box: a text area with Save and Cancel (Escape cancels). */
  openForm() {
    if (this.form || !this.rating) return;
    const form = /** @type {HTMLFormElement} */ (el("form", "rating-form"));
    const text = /** @type {HTMLTextAreaElement} */ (el("textarea"));
    text.name = "comment";
    text.maxLength = MAX_COMMENT;
    text.rows = 2;
    text.value = this.rating.comment || "";
    text.placeholder = "What was good or bad about this reply? (optional)";
    text.setAttribute("aria-label", "Comment on this reply");
    const save = el("button", "primary rating-save", "Save comment");
    save.setAttribute("type", "submit");
    form.append(text, save, button("Cancel", "rating-cancel", () => this.closeForm()));
    form.addEventListener("submit", async (/** @type {SubmitEvent} */ event) => {
      event.preventDefault();
      if (!this.rating) return;
      if (await this.save({ value: this.rating.value, comment: text.value.trim() || null })) this.closeForm();
    });
    text.addEventListener("keydown", (/** @type {KeyboardEvent} */ event) => {
      if (event.key !== "Escape") return;
      event.preventDefault();
      event.stopPropagation();
      this.closeForm();
    });
    this.form = form;
    this.box.appendChild(form);
    this.draw();
    text.focus();
  }

  closeForm() {
    const hadFocus = this.form && this.form.contains(document.activeElement);
    this.form?.remove();
    this.form = null;
    this.draw();
    if (!hadFocus) return;
    if (this.commentButton.hidden) this.up.focus();
    else this.commentButton.focus();
  }
}
