// Two notices above the composer: the streaming check's warning (a proxy that buffers the event
// stream; selftest.js) and, in agent mode, why the code tools are off (from /api/code-tools).
import { api } from "./api.js";
import { button } from "./dom.js";
import { runStreamCheck } from "./selftest.js";

/** Show a streaming check's verdict: a dismissable warning when the stream arrived buffered. */
export function showStreamVerdict(warning, verdict) {
  document.body.dataset.streamCheck = verdict.verdict;
  if (verdict.verdict !== "buffered") {
    warning.hidden = true;
    return;
  }
  warning.textContent = verdict.message;
  warning.appendChild(button("Dismiss", "ghost", () => { warning.hidden = true; }));
  warning.hidden = false;
}

/** Once per browser session after sign-in: warn when a proxy buffers the event stream. */
export async function checkStreamingOnce(warning) {
  if (sessionStorage.getItem("odysseus-stream-checked")) return;
  sessionStorage.setItem("odysseus-stream-checked", "1");
  showStreamVerdict(warning, await runStreamCheck());
}

/** In agent mode, say when run_python / shell are not offered, and why. */
export class CodeToolsNotice {
  /** @param {HTMLElement} node @param {() => string} mode the composer's current mode */
  constructor(node, mode) {
    this.node = node;
    this.mode = mode;
    this.off = "";
  }

  async load() {
    try {
      const info = (await api("GET", "/api/code-tools")) || {};
      const off = info.sandbox !== "disabled" && (!info.available || info.allowed === false);
      this.off = off ? (info.reason || "unavailable") : "";
    } catch (err) {
      this.off = "";
    }
    this.show();
  }

  show() {
    this.node.textContent = this.off ? `Code tools are off: ${this.off}` : "";
    this.node.hidden = !this.off || this.mode() !== "agent";
  }
}
