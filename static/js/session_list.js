// One paged list of the user's sessions for the sidebar: `GET /api/sessions` with fixed filters (the
// pinned chats, one folder's, the dated rest, the archived ones), most recently updated first, a page
// at a time (`before=` the last one shown). It fetches; the sidebar decides when to apply and draw.

import { api } from "./api.js";

export const PAGE = 100;
const MAX_PAGE = 500; // the server's largest page

export class SessionList {
  /** @param {Record<string, string>} filters query arguments every request carries */
  constructor(filters) {
    this.filters = filters;
    /** @type {any[]} */
    this.sessions = [];
    this.hasMore = false;
    /** @type {string | null} */
    this.nextBefore = null;
    /** @type {Promise<void> | null} */
    this.loadingMore = null;
  }

  /** The request for a page of `limit` after `before` (`origin`: the sidebar's page/api switch). */
  url(origin, limit, before) {
    const query = new URLSearchParams({ ...this.filters, limit: String(limit) });
    if (before) query.set("before", before);
    if (origin !== "page") query.set("origin", origin);
    return `/api/sessions?${query}`;
  }

  /** Pages from the newest until as many as are shown, down to the last one shown, are in hand. */
  async fetchShown(origin) {
    const wanted = Math.max(PAGE, this.sessions.length);
    // sessions that moved up push the last one shown down: fetch until it is in hand (at most a page more)
    const untilId = this.sessions.length > PAGE ? this.sessions.at(-1).id : null;
    let sessions = [];
    let before = null;
    let more = true;
    const reached = () => !untilId || sessions.length >= wanted + PAGE || sessions.some((s) => s.id === untilId);
    while (more && (sessions.length < wanted || !reached())) {
      const limit = Math.min(MAX_PAGE, Math.max(PAGE, wanted - sessions.length));
      const data = await api("GET", this.url(origin, limit, before));
      sessions = sessions.concat(data.sessions);
      more = !!data.has_more;
      before = data.next_before;
    }
    return { sessions, more, before };
  }

  /** Take a fetched list (`fetchShown`'s answer) as the one shown. */
  apply(page) {
    this.sessions = page.sessions;
    this.hasMore = page.more;
    this.nextBefore = page.before;
    this.loadingMore = null;
  }

  /** The next page after the last one shown. */
  fetchNext(origin) {
    return api("GET", this.url(origin, PAGE, this.nextBefore));
  }

  /** Append a page (`fetchNext`'s answer), leaving out sessions already shown. */
  append(data) {
    const shown = new Set(this.sessions.map((s) => s.id));
    this.sessions = this.sessions.concat(data.sessions.filter((s) => !shown.has(s.id)));
    this.hasMore = !!data.has_more;
    this.nextBefore = data.next_before;
  }

  clear() {
    this.apply({ sessions: [], more: false, before: null });
  }
}
