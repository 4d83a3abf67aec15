// Compare mode: one message, two or more models, their replies side by side.
//
// Each pane is its own POST /api/chat_stream with mode "compare" (streamed directly: no run, no
// resume, nothing stored). Stop, a session switch or leaving the page aborts every pane's fetch,
// which closes the provider connections on the server. "Keep this" saves the message and that
// pane's text as the chat's exchange (POST /api/compare/keep) and opens the session.

import { api, errorOf, request } from "./api.js";
import { button, el } from "./dom.js";
import { ReplyView, UserView } from "./render.js";
import { readSSE, toEvent } from "./sse_reader.js";

/** Options: {picker, messages, ctx() -> the views' callbacks, models() -> ids, sessionId() -> id|null, onChange(), onKept(id), toast}. */
export class Compare {
  constructor(options) {
    this.o = options;
    this.panes = [];
    this.set = null;
    this.text = "";
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

  /** Send `text` to every chosen model; false (nothing sent) when fewer than two are chosen. */
  start(text) {
    const models = this.chosen();
    if (models.length < 2) {
      this.o.toast("Pick two or more models to compare.");
      return false;
    }
    this.stop(); // an earlier comparison still streaming ends; its panes stay on screen
    this.text = text;
    const user = new UserView(text, this.o.ctx());
    this.set = el("section", "compare-set");
    this.set.setAttribute("aria-label", "Replies side by side");
    this.o.messages.append(user.el, this.set);
    this.user = user;
    this.panes = models.map((model) => this.startPane(model, text));
    this.o.onChange();
    return true;
  }

  startPane(model, text) {
    const reply = new ReplyView(this.o.ctx());
    reply.el.classList.add("compare-pane");
    reply.el.dataset.model = model;
    reply.setLabel({ label: model });
    const pane = { model, reply, controller: new AbortController(), done: false };
    const keep = button("Keep this", "keep-reply", () => this.keep(pane));
    keep.disabled = true;
    pane.keep = keep;
    reply.el.appendChild(keep);
    this.set.appendChild(reply.el);
    const body = { message: text, mode: "compare", model };
    const session = this.o.sessionId();
    if (session) body.session = session;
    this.stream(pane, body);
    return pane;
  }

  async stream(pane, body) {
    let terminal = false;
    try {
      const response = await request("POST", "/api/chat_stream", { json: body, signal: pane.controller.signal });
      if (!response.ok) throw new Error((await errorOf(response)).message);
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
  }

  async keep(pane) {
    for (const other of this.panes) other.keep.disabled = true;
    try {
      const kept = await api("POST", "/api/compare/keep", {
        message: this.text, content: pane.reply.text, thinking: pane.reply.thinking || "", model: pane.model,
        ...(this.o.sessionId() ? { session: this.o.sessionId() } : {}),
      });
      this.stop();
      this.panes = [];
      this.o.onKept(kept.session_id);
    } catch (err) {
      this.o.toast(`Could not keep the reply: ${err.message}`);
      for (const other of this.panes) other.keep.disabled = !other.done || !other.reply.text.trim();
    }
  }
}
