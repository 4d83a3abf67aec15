// Older messages of a long session, loaded on scroll-up.
//
// A session opens with its newest page of messages (GET /api/sessions/{id}/messages). When the
// reader scrolls near the top and the server said `has_more`, the page just before the oldest
// message shown is fetched (`?before=<id>`) and inserted above, with the scroll position kept
// so the message being read does not move. A "Load earlier messages" button at the top does the
// same for keyboard users and for a first page too short to scroll.

import { api } from "./api.js";

export const PAGE_SIZE = 200;
const NEAR_TOP_PX = 300;

/** Options: {render(messages, before, next) -> inserts the messages above `before`, onError(err)}. */
export class HistoryPager {
  constructor(box, options) {
    this.box = box;
    this.options = options;
    this.sessionId = null;
    this.oldest = null; // the oldest message shown (its id is the next `before`)
    this.hasMore = false;
    this.loading = null;
    this.generation = 0; // bumps on every session switch: a late answer for the old one is dropped
    this.marker = document.createElement("button");
    this.marker.type = "button";
    this.marker.className = "history-more ghost";
    this.marker.hidden = true;
    this.marker.addEventListener("click", () => this.loadOlder());
    box.addEventListener("scroll", () => {
      if (this.box.scrollTop < NEAR_TOP_PX) this.loadOlder();
    }, { passive: true });
  }

  /** The newest page of `sessionId` was just rendered. */
  reset(sessionId, page) {
    this.generation += 1;
    this.sessionId = sessionId;
    this.oldest = page.messages.length ? page.messages[0] : null;
    this.hasMore = !!page.has_more && this.oldest !== null;
    this.loading = null;
    this.update();
  }

  /** No session is shown (new chat). */
  clear() {
    this.generation += 1;
    this.sessionId = null;
    this.oldest = null;
    this.hasMore = false;
    this.loading = null;
    this.update();
  }

  update() {
    this.box.dataset.historyMore = this.hasMore ? "true" : "false";
    this.marker.hidden = !this.hasMore;
    this.marker.disabled = !!this.loading;
    this.marker.textContent = this.loading ? "Loading earlier messages…" : "Load earlier messages";
    const first = this.box.querySelector(".msg");
    if (this.hasMore && this.marker.nextSibling !== first) this.box.insertBefore(this.marker, first);
  }

  /** Fetch and insert the page before the oldest message shown (at most one request at a time). */
  loadOlder() {
    if (!this.hasMore || this.loading || !this.sessionId) return this.loading || Promise.resolve();
    const generation = this.generation;
    const sessionId = this.sessionId;
    const next = this.oldest;
    const url = `/api/sessions/${encodeURIComponent(sessionId)}/messages?before=${next.id}&limit=${PAGE_SIZE}`;
    this.loading = api("GET", url).then((page) => {
      if (generation !== this.generation) return;
      const anchor = this.box.querySelector(".msg");
      const fromBottom = this.box.scrollHeight - this.box.scrollTop;
      this.options.render(page.messages, anchor, next);
      this.box.scrollTop = this.box.scrollHeight - fromBottom; // what was on screen stays on screen
      if (page.messages.length) this.oldest = page.messages[0];
      this.hasMore = !!page.has_more && page.messages.length > 0;
    }).catch((err) => {
      if (generation === this.generation) this.options.onError(err);
    }).finally(() => {
      if (generation !== this.generation) return;
      this.loading = null;
      this.update();
    });
    this.update();
    return this.loading;
  }
}
