// Pure SSE parsing for fetch()-read streams: no DOM, no network.
//
// The browser reads POST /api/chat_stream with fetch + a ReadableStream reader (EventSource
// cannot POST). Bytes are decoded as a stream (a UTF-8 character may be split across chunks),
// buffered until a blank line, and only then is the accumulated frame parsed.

/**
 * One parsed SSE frame: a comment line, or an event with its data (null when it had no data line)
 * and its id (null when it had no id line).
 * @typedef {{comment: string, event?: undefined, data?: undefined, id?: undefined}
 *   | {comment?: undefined, event: string, data: string | null, id: string | null}} Frame
 */

/** Incremental parser: push() text chunks, get back complete frames. */
export class SSEParser {
  constructor() {
    this.buffer = "";
  }

  /**
   * Feed decoded text; return the frames completed by it: {event, data, id} or {comment}.
   * @param {string} text
   * @returns {Frame[]}
   */
  push(text) {
    this.buffer += text;
    /** @type {Frame[]} */
    const frames = [];
    for (;;) {
      const match = /\r\n\r\n|\n\n|\r\r/.exec(this.buffer);
      if (!match) break;
      const block = this.buffer.slice(0, match.index);
      this.buffer = this.buffer.slice(match.index + match[0].length);
      frames.push(...parseBlock(block));
    }
    return frames;
  }
}

/**
 * Parse one blank-line-terminated block into zero or more frames.
 * @param {string} block
 * @returns {Frame[]}
 */
export function parseBlock(block) {
  /** @type {Frame[]} */
  const out = [];
  /** @type {string[]} */
  const dataLines = [];
  /** @type {string | null} */
  let event = null;
  /** @type {string | null} */
  let id = null;
  for (const line of block.split(/\r\n|\n|\r/)) {
    if (line.startsWith(":")) {
      out.push({ comment: line.slice(1).trim() });
      continue;
    }
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") dataLines.push(value);
    else if (field === "event") event = value;
    else if (field === "id") id = value;
  }
  if (dataLines.length || event !== null || id !== null) {
    out.push({ event: event || "message", data: dataLines.length ? dataLines.join("\n") : null, id });
  }
  return out;
}

/**
 * Turn a parsed frame into a chat-stream event object {type, ...fields}, or null.
 * `data: {"delta": ..}` -> type "delta"; `data: [DONE]` -> "done"; `event: error` -> "error".
 * @param {Frame} frame
 * @returns {import("./render.js").StreamEvent | null}
 */
export function toEvent(frame) {
  if (frame.comment !== undefined) return null;
  /** @type {any} */
  let payload = null;
  if (frame.data === "[DONE]") return { type: "done" };
  if (frame.data !== null) {
    try {
      payload = JSON.parse(frame.data);
    } catch (err) {
      payload = { text: frame.data };
    }
  }
  if (frame.event === "error") {
    const body = payload && typeof payload === "object" ? payload : { error: String(frame.data) };
    return { ...body, type: "error" };
  }
  if (!payload || typeof payload !== "object") return null;
  if (typeof payload.type === "string") return payload;
  if (typeof payload.delta === "string") return { ...payload, type: "delta" };
  return null;
}

/**
 * Read an SSE response to its end. onFrame(frame) is called per frame (comments included) and may
 * return true to stop reading (after an `event: error`). onBytes() is called on every chunk so the
 * caller can reset its "still alive" timer. Resolves "stopped" or "eof"; rejects on network errors.
 * @param {Response} response
 * @param {(frame: Frame) => boolean | void} onFrame
 * @param {() => void} [onBytes]
 * @returns {Promise<"stopped" | "eof">}
 */
export async function readSSE(response, onFrame, onBytes) {
  if (!response.body) return "eof"; // a response with no body (204, HEAD) has no frames
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const parser = new SSEParser();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      // A frame cut off by the end of the stream is dropped, as EventSource does: its id must not
      // advance the resume cursor past text that never arrived.
      if (done) return "eof";
      if (onBytes) onBytes();
      for (const frame of parser.push(decoder.decode(value, { stream: true }))) {
        if (onFrame(frame) === true) {
          reader.cancel().catch(() => {});
          return "stopped";
        }
      }
    }
  } finally {
    try {
      reader.releaseLock();
    } catch (err) {
      /* already released */
    }
  }
}
