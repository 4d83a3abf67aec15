// The send and branch controller: what happens when the user sends a message, answers an
// approval, continues the agent, regenerates a reply, resends an edited message or picks another
// branch. It builds the turn's request body from the composer's controls, puts the optimistic
// bubbles on the page, starts the Turn (stream.js) and reacts to its outcome. Streaming rules live in
// stream.js; the page wiring (which element is which, the sidebar, the chrome) in chat.js.

import { api } from "./api.js";
import { showChips } from "./attachments.js";
import { cutFrom, selectBranch } from "./branches.js";
import { ReplyView, UserView } from "./render.js";
import { Turn } from "./stream.js";

/**
 * A Turn (stream.js) with what the page keeps on it while it runs.
 * @typedef {Turn & {userView?: UserView | null, text?: string, branch?: boolean, newSession?: boolean}} PageTurn
 */

/**
 * What the controller needs from the page (chat.js wires it).
 * @typedef {object} TurnHooks
 * @property {import("./chat_state.js").ChatState} state
 * @property {HTMLElement} messages the message list
 * @property {() => import("./render.js").ViewContext} ctx the callbacks every message view gets
 * @property {() => string} mode the composer's mode (chat, agent, compare)
 * @property {number} maxChars the longest message the server takes
 * @property {any} compare compare.js
 * @property {any} attachments attachments.js (the composer's uploads)
 * @property {any} controls context_controls.js (Web toggle, workspace)
 * @property {{on: () => boolean}} research the Research toggle
 * @property {any} documents the document panel (documents.js)
 * @property {any} workflows workflows.js (the picked Agent Alloy workflow)
 * @property {any} sidebar sidebar.js
 * @property {() => any} composer composer_input.js (made after the controller)
 * @property {HTMLTextAreaElement} input the composer's text box
 * @property {HTMLSelectElement} modelPicker
 * @property {HTMLElement} note the line under the composer
 * @property {(text: string) => void} toast
 * @property {() => void} showEmpty show the empty state if no message is on the page
 * @property {() => void} scrollToEnd follow the list to its end
 * @property {() => void} updateComposer Send or Stop
 * @property {(sessionId: string | null) => void} setUrl
 * @property {(sessionId: string) => Promise<void>} openSession
 * @property {(sessionId: string) => void} refreshMeter the context meter of the shown session
 * @property {(sessionId: string) => void} watchTitle look for the title the server writes
 */

function newClientId() {
  return (crypto.randomUUID && crypto.randomUUID()) || `c${Date.now()}${Math.random().toString(16).slice(2)}`;
}

export class TurnController {
  /** @param {TurnHooks} hooks */
  constructor(hooks) {
    this.hooks = hooks;
  }

  /** Whether a reply (this page's turn or a comparison) is streaming. */
  running() {
    return this.hooks.state.turnRunning() || this.hooks.compare.running();
  }

  /**
   * A Turn with the page's reactions to it (session named, refused, replaced, finished).
   * @param {{sessionId: string | null, reply: ReplyView, runId?: string}} options
   * @returns {PageTurn}
   */
  makeTurn(options) {
    const hooks = this.hooks;
    const { state, sidebar } = hooks;
    return new Turn({
      ...options,
      stallMs: Number(document.body.dataset.stallMs) || 45000,
      onSession: (sessionId, turn) => {
        if (state.turn === turn && !state.sessionId) {
          state.sessionId = sessionId;
          hooks.setUrl(sessionId);
        }
        sidebar.setRunning(sessionId, true);
        sidebar.refresh();
      },
      /** @type {(error: Error, turn: PageTurn) => void} */
      onRefused: (error, turn) => {
        // Nothing was stored: take the optimistic bubbles away and give the text back with the reason.
        turn.userView?.el.remove();
        turn.reply.el.remove();
        this.giveBack(turn.text, error);
      },
      onReplaced: (saved, turn) => {
        const view = ReplyView.fromMessage(saved, hooks.ctx());
        turn.reply.el.replaceWith(view.el);
        turn.reply = view;
      },
      /** @type {(turn: PageTurn) => void} */
      onFinish: (turn) => {
        if (state.turn === turn) hooks.updateComposer();
        sidebar.setRunning(turn.sessionId, false); // also reloads the list (titles, order, runs)
        if (turn.sessionId === state.sessionId) this.assignIds(turn);
        if (turn.sessionId && turn.sessionId === state.sessionId) hooks.refreshMeter(turn.sessionId);
        if (turn.newSession && turn.sessionId && !turn.refused) hooks.watchTitle(turn.sessionId);
        // a regenerate or resend made a branch: show the session again, with its `< 2/2 >` pager
        if (turn.branch && turn.sessionId && turn.sessionId === state.sessionId && !turn.detached) {
          hooks.openSession(turn.sessionId);
        }
      },
    });
  }

  /**
   * Give freshly sent user messages their database ids, so edit and delete work at once.
   * @param {PageTurn} turn
   */
  async assignIds(turn) {
    const userView = turn.userView;
    if (!userView || userView.id !== null || !turn.sessionId) return;
    try {
      const data = await api("GET", `/api/sessions/${encodeURIComponent(turn.sessionId)}/messages`);
      const row = data.messages.find((/** @type {any} */ m) => m.role === "user" && m.client_message_id === userView.clientId);
      if (row) userView.setMessageId(row.id);
    } catch (err) {
      /* edit/delete appear after the next load */
    }
  }

  /**
   * A new message settles the choices and Continue buttons of the replies above it.
   * @param {string} text
   */
  settleReplies(text) {
    for (const node of this.hooks.messages.querySelectorAll(".msg.assistant")) {
      /** @type {Element & {replyView?: ReplyView}} */ (node).replyView?.settle(text); // set by ReplyView
    }
  }

  /**
   * A send the server refused (nothing stored): the text goes back in the box, with the reason.
   * @param {string} text
   * @param {Error} error
   */
  giveBack(text, error) {
    const hooks = this.hooks;
    hooks.showEmpty();
    const composer = hooks.composer();
    if (!hooks.input.value.trim() && text) {
      hooks.input.value = text;
      composer.autosize();
      composer.updateCount();
    }
    composer.note(`Not sent: ${error.message}. Your message is back in the box.`, "error");
    hooks.note.dataset.reason = "refused";
  }

  /**
   * Send `text` as the next message (or an approval answer when showUser is false).
   * @param {string} text
   * @param {{mode?: string, extra?: Record<string, any>, showUser?: boolean, branch?: boolean}} [options]
   * @returns {boolean} whether it was sent
   */
  send(text, { mode: sendMode = this.hooks.mode(), extra = {}, showUser = true, branch = false } = {}) {
    const hooks = this.hooks;
    const { state, compare, attachments } = hooks;
    if (!text.trim()) return false;
    if (this.running()) {
      hooks.toast("Wait for the reply to finish, or press Stop, before sending.");
      return false;
    }
    // The Workflow mode: agent turns answered by the picked workflow (approval answers and Continue,
    // sent as "agent", go to the same workflow).
    const workflowId = hooks.mode() === "workflow" ? hooks.workflows.value() : "";
    if (sendMode === "workflow") {
      if (!workflowId) {
        hooks.toast("Pick a workflow first (beside the mode, or in the ⋯ menu).");
        return false;
      }
      sendMode = "agent";
    }
    if (sendMode === "compare" && showUser && !branch) { // side by side (compare.js); each reply saved as an alternative
      if (attachments.busy) {
        hooks.toast("Wait for the uploads to finish before sending.");
        return false;
      }
      this.settleReplies(text);
      // The panes get what a chat turn gets: its context switches and the attachments.
      const started = compare.start(text, {
        fields: hooks.controls.turnFields("chat"), files: attachments.take(),
        onRefused: (/** @type {Error} */ error) => this.giveBack(text, error),
      });
      if (started) { hooks.showEmpty(); hooks.scrollToEnd(); hooks.updateComposer(); }
      return started;
    }
    if (showUser && attachments.busy) {
      hooks.toast("Wait for the uploads to finish before sending.");
      return false;
    }
    this.settleReplies(text);
    const clientId = newClientId();
    let userView = null;
    const files = showUser && !branch ? attachments.take() : [];
    if (files.length) extra = { ...extra, attachments: files.map((/** @type {{id: string}} */ f) => f.id) };
    const ctx = hooks.ctx();
    if (showUser) {
      userView = new UserView(text, ctx, { clientId });
      showChips(userView.el, files);
      hooks.messages.appendChild(userView.el);
    }
    const reply = new ReplyView(ctx);
    hooks.messages.appendChild(reply.el);
    hooks.showEmpty();
    hooks.scrollToEnd();
    const turn = this.makeTurn({ sessionId: state.sessionId, reply });
    turn.userView = userView;
    turn.text = branch && !showUser ? "" : text; // a refused regenerate puts no word in the box
    turn.branch = branch;
    turn.newSession = !state.sessionId;
    state.turn = turn;
    hooks.updateComposer();
    /** @type {Record<string, any>} */
    const body = { message: text, mode: sendMode, client_message_id: clientId, ...hooks.controls.turnFields(sendMode), ...extra };
    if (showUser && hooks.research.on() && !extra.continue) body.use_research = true;
    if (state.sessionId) {
      body.session = state.sessionId;
      hooks.sidebar.setRunning(state.sessionId, true);
    }
    if (hooks.modelPicker.value) body.model = hooks.modelPicker.value;
    const docId = hooks.documents.activeDocId(); // an open document goes with the turn
    if (docId) body.active_doc_id = docId;
    if (workflowId && body.mode === "agent") body.workflow_id = workflowId;
    turn.send(body);
    return true;
  }

  /** Stop what is streaming: the comparison, or this page's turn. */
  stop() {
    if (this.hooks.compare.running()) this.hooks.compare.stop();
    else this.hooks.state.turn?.stop();
  }

  // ---- branches (branches.js): regenerate / retry, edit and resend, the `< 2/3 >` pager -------------

  /** Whether a reply is streaming (then a branch must wait; the user is told). */
  busyForBranch() {
    if (!this.running()) return false;
    this.hooks.toast("Wait for the reply to finish, or press Stop, first.");
    return true;
  }

  /**
   * Answer the reply's user message again; the reply stays as an alternative.
   * @param {ReplyView} view
   */
  regenerateReply(view) {
    if (this.busyForBranch() || view.id === null) return false;
    cutFrom(view.el);
    return this.send("Regenerate", { showUser: false, extra: { regenerate_of: view.id }, branch: true });
  }

  /**
   * Send `text` as an edited version of `view`'s message; what followed stays as the earlier branch.
   * @param {UserView | ReplyView} view
   * @param {string} text
   */
  resendEdited(view, text) {
    if (this.busyForBranch() || view.id === null) return false;
    if (text.length > this.hooks.maxChars) {
      this.hooks.toast(`The edited message is over the ${this.hooks.maxChars.toLocaleString()} character limit.`);
      return false;
    }
    cutFrom(view.el);
    return this.send(text, { extra: { edit_of: view.id }, branch: true });
  }

  /**
   * Show the alternative `messageId` (and the newest messages below it), stored for reloads and the model.
   * @param {number} messageId
   */
  async showBranch(messageId) {
    const sessionId = this.hooks.state.sessionId;
    if (!sessionId || this.busyForBranch()) return;
    try {
      await selectBranch(sessionId, messageId);
    } catch (err) {
      this.hooks.toast(`Could not switch: ${err instanceof Error ? err.message : err}`);
      return;
    }
    if (this.hooks.state.sessionId === sessionId) await this.hooks.openSession(sessionId);
  }
}
