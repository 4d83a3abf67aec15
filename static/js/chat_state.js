// The page's state store: which session is shown, the turn streaming into it, and what the loaded
// history says. One instance per page (chat.js makes it); the other modules read and change it
// through this object only, so "what is on screen" has one source.

/** @typedef {import("./stream.js").Turn} Turn */

export class ChatState {
  constructor() {
    /** @type {string | null} the session shown (null: a new chat not yet stored) */
    this.sessionId = null;
    /** @type {(Turn & Record<string, any>) | null} the turn streaming into the shown session, if any */
    this.turn = null;
    /** bumped by every open or new chat: an older load that finishes late sees it changed and stops */
    this.loadToken = 0;
    /** @type {Set<string>} approval ids answered anywhere in the loaded history (older pages render after newer ones) */
    this.answered = new Set();
    /** @type {any} the shown session's stream_status, when known */
    this.status = null;
    /** @type {string[]} the ids of the models the picker offers (GET /api/models) */
    this.models = [];
  }

  /** Start loading another view of the page; answers the token that tells whether it is still current. */
  beginLoad() {
    this.loadToken += 1;
    return this.loadToken;
  }

  /**
   * Whether the load that got `token` is still the page's newest.
   * @param {number} token
   */
  isCurrent(token) {
    return token === this.loadToken;
  }

  /** Whether this page's own turn is still streaming. */
  turnRunning() {
    return !!(this.turn && !this.turn.finished);
  }
}
