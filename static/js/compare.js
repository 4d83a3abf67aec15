// Compare mode: one message, two or more models, their replies side by side.
//
// The question is stored first (POST /api/compare/start, which creates the session when there is
// none); then each pane is its own POST /api/chat_stream with mode "compare" and `compare_of` (the
// question's id), streamed directly: no run, no resume. The server saves each pane's reply once,
// as an alternative reply to the question, as it streams. Stop, a session switch or leaving the
// page aborts every pane's fetch, which closes the provider connections on the server and leaves
// that pane's partial reply saved. After a reload the replies show as alternatives (the `< i/n >`
// pager). "Keep this" selects that reply's branch, so the conversation continues from it.

import { api, errorOf, request } from "./api.js";
import { button, el } from "./dom.js";
import { ReplyView, UserView } from "./render.js";
import { readSSE, toEvent } from "./sse_reader.js";

/** Options: {picker, messages, ctx() -> the views' callbacks, models() -> ids, sessionId() -> id|null,
 *  onSession(id) (the question created this session), onChange(), onKept(id), toast}. */
export class Compare {
  constructor(options) {
    this.o = options;
    this.panes = [];
    this.set = null;
    this.text = "";
    /** @type {string | null} the session the current comparison's question is stored in */
    this.sessionId = null;
    addEventListener("pagehide", () => this.abandon());
  }

  /** Show the model checkboxes (two are ticked to begin with). */
  renderPicker(show) {
    const picker = this.o.picker;
    picker.hidden = !show;
    if (!show) return;
    const ticked = new Set(this.chosen());
    picker.textContent = "";
    picker.appendChild(el("span", "compare-title", "Compare:"));
    this.o.models().forEach((id, index) => {
      const label = el("label", "compare-model");
      const box = Object.assign(document.createElement("input"), { type: "checkbox", value: id });
      box.checked = ticked.size ? ticked.has(id) : index < 2;
      label.append(box, el("span", null, id));
      picker.appendChild(label);
    });
  }

  chosen() {
    return [...this.o.picker.querySelectorAll("input[type=checkbox]:checked")].map((box) => box.value);
  }

  running() {
    return this.panes.some((pane) => !pane.done);
  }

  /**
   * Send `text` to every chosen model; false (nothing sent) when fewer than two are chosen.
   * @param {string} text
   * @param {{fields?: Record<string, any>, files?: Array<{id: string}>, onRefused?: (error: Error) => void}} [context]
   *   the chat turn's context switches and attachments (they apply to every pane), and what to do
   *   when the server refuses the question (nothing was stored)
   */
  start(text, { fields = {}, files = [], onRefused = () => {} } = {}) {
    const models = this.chosen();
    if (models.length < 2) {
      this.o.toast("Pick two or more models to compare.");
      return false;
    }
    this.stop(); // an earlier comparison still streaming ends; its panes stay on screen
    this.text = text;
    this.sessionId = null;
    const user = new UserView(text, this.o.ctx());
    const set = el("section", "compare-set");
    this.set = set;
    set.setAttribute("aria-label", "Replies side by side");
    this.o.messages.append(user.el, set);
    this.user = user;
    /** @type {Record<string, any>} */
    const ask = { message: text, models, ...fields };
    if (files.length) ask.attachments = files.map((file) => file.id);
    const session = this.o.sessionId();
    if (session) ask.session = session;
    // The question is stored once, before any pane streams; every pane waits for it.
    const question = api("POST", "/api/compare/start", ask).then((started) => {
      if (this.user !== user) return started; // left for another session meanwhile: stay there
      this.sessionId = started.session_id;
      if (!session) this.o.onSession(started.session_id);
      return started;
    });
    question.catch((err) => { // refused (a bad attachment, a foreign session): nothing stored, nothing shown
      if (this.user !== user) return;
      user.el.remove();
      set.remove();
      if (this.set === set) this.set = null;
      onRefused(err);
    });
    this.panes = models.map((model) => this.startPane(model, text, question, fields));
    this.o.onChange();
    return true;
  }

  startPane(model, text, question, fields) {
    const reply = new ReplyView(this.o.ctx());
    reply.el.classList.add("compare-pane");
    reply.el.dataset.model = model;
    reply.setLabel({ label: model });
    const pane = { model, reply, controller: new AbortController(), done: false, messageId: null };
    const keep = button("Keep this", "keep-reply", () => this.keep(pane));
    keep.disabled = true;
    pane.keep = keep;
    reply.el.appendChild(keep);
    this.set.appendChild(reply.el);
    this.stream(pane, question.then((started) => ({
      message: text, mode: "compare", model, session: started.session_id, compare_of: started.message_id, ...fields,
    })));
    return pane;
  }

  async stream(pane, bodyPromise) {
    let terminal = false;
    try {
      const body = await bodyPromise;
      if (pane.controller.signal.aborted) throw new DOMException("stopped before it started", "AbortError");
      const response = await request("POST", "/api/chat_stream", { json: body, signal: pane.controller.signal });
      if (!response.ok) throw new Error((await errorOf(response)).message);
      pane.messageId = Number(response.headers.get("X-Odysseus-Message-Id")) || null;
      await readSSE(response, (frame) => {
        if (frame.comment !== undefined) return false;
        const event = toEvent(frame);
        if (!event) return false;
        pane.reply.handle(event);
        if (event.type === "done" || event.type === "error") terminal = true;
        return event.type === "error";
      });
      if (!terminal) pane.reply.finish("failed", "the stream ended early");
    } catch (err) {
      if (pane.controller.signal.aborted) pane.reply.finish("stopped");
      else pane.reply.finish("failed", err.message || String(err));
    }
    pane.done = true;
    pane.keep.disabled = !pane.reply.text.trim();
    this.o.onChange();
  }

  /** Stop every pane still streaming (the partial texts stay and can be kept). */
  stop() {
    for (const pane of this.panes) if (!pane.done) pane.controller.abort();
  }

  /** Leaving the comparison (another session, a new chat, the page closing): stop and forget it. */
  abandon() {
    this.stop();
    this.panes = [];
    for (const node of this.o.messages.querySelectorAll(".compare-set")) node.remove();
    this.set = null;
    this.sessionId = null;
    this.user = null;
  }

  /** Continue the conversation from `pane`'s reply: select its branch (it is saved already). */
  async keep(pane) {
    for (const other of this.panes) other.keep.disabled = true;
    let session = this.sessionId || this.o.sessionId();
    try {
      if (pane.messageId && session) {
        await api("PUT", `/api/sessions/${encodeURIComponent(session)}/branch`, { message_id: pane.messageId });
      } else { // a pane the server did not save (its start failed): keep its text the older way
        session = (await api("POST", "/api/compare/keep", {
          message: this.text, content: pane.reply.text, thinking: pane.reply.thinking || "", model: pane.model,
          ...(session ? { session } : {}),
        })).session_id;
      }
      this.stop();
      this.panes = [];
      this.o.onKept(session);
    } catch (err) {
      this.o.toast(`Could not keep the reply: ${err.message}`);
      for (const other of this.panes) other.keep.disabled = !other.done || !other.reply.text.trim();
    }
  }
}
