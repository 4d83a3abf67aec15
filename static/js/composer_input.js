// The composer's text box: Enter sends (Shift+Enter is a new line), the button is Send or Stop,
// the box grows with its text, and the character count shows from 80 % of MAX_MESSAGE_CHARS. An
// over-long message or a send while a reply is running is refused with a note; the text stays. A menu
// over the box (the `/` prompt menu, prompt_menu.js) sees every key first through `keys`.

export class ComposerInput {
  /**
   * @param {{form: HTMLFormElement, input: HTMLTextAreaElement, note: HTMLElement, charCount: HTMLElement,
   *          maxChars: number, running: () => boolean, stop: () => void, send: (text: string) => boolean,
   *          keys?: (event: KeyboardEvent) => boolean}} options
   *   `send` answers false when the page refused the message (e.g. uploads still going): the text stays;
   *   `keys` answers true when it used the key (then Enter does not send)
   */
  constructor({ form, input, note, charCount, maxChars, running, stop, send, keys }) {
    this.form = form;
    this.input = input;
    this.noteEl = note;
    this.charCount = charCount;
    this.maxChars = maxChars;
    this.running = running;
    this.stop = stop;
    this.send = send;
    form.addEventListener("submit", (event) => { event.preventDefault(); this.submit(); });
    input.addEventListener("keydown", (event) => {
      if (keys?.(event)) return;
      if (event.key !== "Enter" || event.shiftKey || event.isComposing) return;
      event.preventDefault();
      if (!running()) form.requestSubmit();
      else if (input.value.trim()) {
        this.note("A reply is still being written: wait for it to finish or press Stop, then send. " +
                  "Your message stays here.");
      }
    });
    input.addEventListener("input", () => { this.autosize(); this.updateCount(); });
  }

  /** The Send/Stop button: stop a running reply, else send the text if it is within the limit. */
  submit() {
    if (this.running()) {
      this.stop();
      return;
    }
    const text = this.input.value;
    if (!text.trim()) return;
    const max = this.maxChars;
    if (text.length > max) {
      this.note(`This message is ${text.length.toLocaleString()} characters; the limit is ${max.toLocaleString()}. ` +
                "Shorten it or split it; your text stays here.", "error");
      this.noteEl.dataset.reason = "length";
      return;
    }
    this.note("");
    if (!this.send(text)) return;
    this.input.value = "";
    this.autosize();
    this.updateCount();
  }

  /** Show (or clear, with "") the note under the composer; `kind` is "info" or "error". */
  note(text, kind = "info") {
    this.noteEl.textContent = text || "";
    this.noteEl.dataset.kind = kind;
  }

  /** The character count, shown from 80 % of the limit and marked when over it. */
  updateCount() {
    const length = this.input.value.length;
    const max = this.maxChars;
    this.charCount.textContent = length >= max * 0.8
      ? `${length.toLocaleString()} / ${max.toLocaleString()} characters` : "";
    this.charCount.dataset.over = length > max ? "true" : "false";
    if (this.noteEl.dataset.kind === "error" && length <= max && this.noteEl.dataset.reason === "length") {
      this.note("");
    }
  }

  autosize() {
    this.input.style.height = "auto";
    this.input.style.height = `${Math.min(this.input.scrollHeight, 240)}px`;
  }
}
