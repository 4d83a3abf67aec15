// A Turn is one reply being streamed into one ReplyView: started by a send (POST /api/chat_stream)
// or attached to a run already going (GET /api/chat/resume). It owns the transport rules:
//
// - every frame's `id` advances the cursor; a dropped transport (no terminal event) shows
//   "reconnecting", asks stream_status and resumes after the cursor, so no text is lost or repeated;
// - `event: error` is terminal and stops parsing; comments only reset the "still alive" timer;
// - Stop uses the run id from this turn's own response header; a Stop pressed before the header
//   arrived is queued and sent with that id, so a stale Stop can never stop a newer run;
// - detach() (switching session, leaving) only drops the connection: the run goes on server-side.

import { errorOf, request } from "./api.js";
import { readSSE, toEvent } from "./sse_reader.js";

/** @typedef {import("./render.js").ReplyView} ReplyView */
/** @typedef {import("./sse_reader.js").Frame} Frame */

/**
 * What a turn is given: where it streams and who hears about it.
 * @typedef {object} TurnOptions
 * @property {ReplyView} reply the view the reply is drawn into
 * @property {string | null} [sessionId] the session (null: a new chat, learnt from the response)
 * @property {string | null} [runId] the run, when attaching to one already known
 * @property {number} [stallMs] silence after which the connection counts as dead (45 s)
 * @property {(sessionId: string, turn: Turn) => void} [onSession] the server named the session
 * @property {(runId: string, turn: Turn) => void} [onRunId] the server named the run
 * @property {(error: import("./api.js").ApiError, turn: Turn) => void} [onRefused] refused before anything was stored
 * @property {(saved: any, turn: Turn) => void} [onReplaced] the run's log is gone; this saved reply stands for it
 * @property {(turn: Turn) => void} [onFinish] the turn is over (whatever its outcome)
 */

const TERMINAL = new Set(["chat_terminal", "agent_terminal", "done", "error"]);
/** @param {number} ms */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** One reply being streamed into one ReplyView (see the rules above). */
export class Turn {
  /** @param {TurnOptions} options */
  constructor(options) {
    this.sessionId = options.sessionId || null;
    this.reply = options.reply;
    this.options = options;
    this.runId = options.runId || null;
    this.lastId = 0;
    this.terminal = false;
    this.finished = false;
    this.detached = false;
    this.stopQueued = false;
    this.stopSent = false;
    /** @type {import("./api.js").ApiError | null} why the server refused the send, if it did */
    this.refused = null;
    /** @type {AbortController | null} the open request's, to drop it */
    this.connection = null;
    this.stallMs = options.stallMs || 45000;
    this.connections = 0;
  }

  /**
   * Start a new reply: POST /api/chat_stream with `body`.
   * @param {Record<string, any>} body
   * @returns {Promise<void>}
   */
  async send(body) {
    let response;
    for (let attempt = 0; ; attempt++) {
      try {
        response = await this.open("POST", "/api/chat_stream", body, {});
        break;
      } catch (err) {
        if (this.detached) return;
        // The request may or may not have reached the server. Repeating it with the same
        // client_message_id is safe (the server attaches to the turn it already started);
        // anything else could answer twice, so it is reported instead.
        if (!body.client_message_id || !body.session || attempt >= 2) {
          return this.fail(`could not reach the server (${err instanceof Error ? err.message : err})`);
        }
        this.reply.setStatus("reconnecting", "Reconnecting…");
        await sleep(500 * (attempt + 1));
      }
    }
    if (!response.ok) {
      // Refused before anything was stored (too long, too large, bad input): the page keeps the text.
      const error = await errorOf(response);
      this.refused = error;
      this.options.onRefused?.(error, this);
      return this.fail(error.message);
    }
    return this.consume(response);
  }

  /**
   * Attach to the session's running run from the start of its log (after a reload or a switch).
   * @returns {Promise<void>}
   */
  async attach() {
    return this.reconnect({ quiet: true });
  }

  /**
   * One request of this turn, abortable through `connection`; learns the session and run ids.
   * @param {string} method
   * @param {string} url
   * @param {Record<string, any> | undefined} json
   * @param {Record<string, string>} headers
   * @returns {Promise<Response>}
   */
  async open(method, url, json, headers) {
    const controller = new AbortController();
    this.connection = controller;
    this.connections += 1;
    // Headers that do not come within the stall time mean a dead connection (a pooled socket
    // behind a vanished NAT entry, a hung proxy): abort, so the next try opens a fresh one.
    const timer = setTimeout(() => controller.abort(new DOMException("no response", "AbortError")), this.stallMs);
    try {
      const response = await request(method, url, { json, headers, signal: controller.signal });
      this.learnHeaders(response);
      return response;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Take the session and run ids from a response's headers; send a Stop that waited for the run id.
   * @param {Response} response
   */
  learnHeaders(response) {
    const session = response.headers.get("X-Odysseus-Session-Id");
    if (session && !this.sessionId) {
      this.sessionId = session;
      this.options.onSession?.(session, this);
    }
    const runId = response.headers.get("X-Odysseus-Run-Id");
    if (runId && !this.runId) {
      this.runId = runId;
      this.options.onRunId?.(runId, this);
    }
    if (this.stopQueued && this.runId) {
      this.stopQueued = false;
      this.sendStop();
    }
  }

  /**
   * Read one response; on a drop without a terminal event, reconnect from the cursor.
   * @param {Response} response
   * @returns {Promise<void>}
   */
  async consume(response) {
    const controller = this.connection;
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let timer;
    const alive = () => {
      clearTimeout(timer);
      timer = setTimeout(() => controller?.abort(new DOMException("stalled", "AbortError")), this.stallMs);
    };
    alive();
    try {
      await readSSE(response, (frame) => this.onFrame(frame), alive);
    } catch (err) {
      /* a network drop, a stall abort or a detach: decided below */
    } finally {
      clearTimeout(timer);
    }
    if (this.detached) return;
    if (this.terminal) return this.complete();
    return this.reconnect();
  }

  /**
   * Apply one frame: advance the cursor, hand the event to the reply.
   * @param {Frame} frame
   * @returns {boolean} true to stop reading (an error frame)
   */
  onFrame(frame) {
    if (frame.comment !== undefined) return false;
    if (frame.id !== null && frame.id !== undefined && /^\d+$/.test(frame.id)) this.lastId = Number(frame.id);
    const event = toEvent(frame);
    if (!event) return false;
    this.reply.handle(event);
    if (TERMINAL.has(event.type)) this.terminal = true;
    return event.type === "error"; // an error frame ends parsing of normal output
  }

  /**
   * stream_status, then resume after the cursor; fall back to the saved history.
   * @param {{quiet?: boolean}} [options] quiet: attaching, not recovering (no "Reconnecting…")
   * @returns {Promise<void>}
   */
  async reconnect({ quiet = false } = {}) {
    if (!quiet) this.reply.setStatus("reconnecting", "Reconnecting…");
    for (let attempt = 0; attempt < 12 && !this.detached; attempt++) {
      if (attempt > 0 || !quiet) await sleep(Math.min(250 * 2 ** attempt, 4000));
      if (this.detached) return;
      let status;
      try {
        const response = await request("GET", `/api/chat/stream_status/${encodeURIComponent(this.sessionId || "")}`,
                                       { signal: AbortSignal.timeout(this.stallMs) });
        if (response.status === 404) return this.fromHistory();
        if (!response.ok) continue;
        status = await response.json();
      } catch (err) {
        continue;
      }
      if ((this.runId && status.run_id !== this.runId) || !status.resumable) return this.fromHistory();
      if (!this.runId) this.runId = status.run_id;
      let response;
      try {
        response = await this.open("GET", `/api/chat/resume/${encodeURIComponent(this.sessionId || "")}?after=${this.lastId}`,
                                    undefined, { Accept: "text/event-stream", "Last-Event-ID": String(this.lastId) });
      } catch (err) {
        continue;
      }
      if (response.status === 404) return this.fromHistory();
      if (!response.ok) continue;
      const served = response.headers.get("X-Odysseus-Run-Id");
      if (served && served !== this.runId) {
        // A newer run took the session between the two requests: our cursor means nothing there.
        this.connection?.abort();
        return this.fromHistory();
      }
      if (this.reply.statusLine.dataset.kind === "reconnecting") this.reply.setStatus(null, null);
      return this.consume(response);
    }
    if (!this.detached) this.fail("the connection was lost; reload the page to see the saved reply");
  }

  /**
   * The run's log is gone: show the saved reply of this run instead, if there is one.
   * @returns {Promise<void>}
   */
  async fromHistory() {
    try {
      const response = await request("GET", `/api/sessions/${encodeURIComponent(this.sessionId || "")}/messages`);
      /** @type {{messages: Array<{role: string, run_id?: string}>}} */
      const data = response.ok ? await response.json() : { messages: [] };
      const saved = data.messages.find((m) => m.role === "assistant" && this.runId && m.run_id === this.runId);
      if (saved) {
        this.options.onReplaced?.(saved, this);
        return this.complete();
      }
    } catch (err) {
      /* fall through */
    }
    return this.fail("the reply was interrupted and was not saved");
  }

  /**
   * End the turn as failed, with the reason on the reply.
   * @param {string} message
   */
  fail(message) {
    this.reply.finish("failed", message);
    return this.complete();
  }

  /** End the turn (once): render what is pending and tell the page. */
  complete() {
    if (this.finished) return;
    this.finished = true;
    this.reply.flush();
    this.options.onFinish?.(this);
  }

  /** Stop this turn's run (queued until its run id is known). */
  stop() {
    if (this.finished || this.stopSent) return;
    this.reply.setStatus("stopping", "Stopping…");
    if (!this.runId || !this.sessionId) {
      this.stopQueued = true;
      return;
    }
    this.sendStop();
  }

  /** POST the stop for this turn's run (its id is known by now). */
  async sendStop() {
    this.stopSent = true;
    try {
      await request("POST", `/api/chat/stop/${encodeURIComponent(this.sessionId || "")}`,
                    { headers: { "X-Odysseus-Run-Id": this.runId || "" } });
    } catch (err) {
      /* the stream's own terminal event tells the outcome */
    }
  }

  /** Drop the connection without stopping the run (it keeps going server-side). */
  detach() {
    this.detached = true;
    this.connection?.abort();
  }
}
