// The streaming self-test: read GET /api/diagnostics/stream, note when each frame arrives, and say
// whether the frames came spread out as sent or bunched (a buffering proxy). Same rule as
// odysseus/diagnostics.py `assess`.

import { request } from "./api.js";
import { readSSE } from "./sse_reader.js";

const COUNT = 5;
const INTERVAL_MS = 400;
const BUNCHED_RATIO = 0.5;
export const FIX = "A proxy between you and Odysseus buffers or compresses the event stream, so replies arrive " +
  "in one burst at the end. Fix: in nginx set `proxy_buffering off;` for Odysseus (it honours the app's " +
  "X-Accel-Buffering: no) and do not gzip text/event-stream. See docs/deploy.md, \"Streaming through a proxy\".";

/** Judge arrival times (ms): {verdict: ok|buffered|incomplete, message, spread, expected}. */
export function assess(arrivals, intervalMs = INTERVAL_MS, count = COUNT) {
  const expected = intervalMs * (count - 1);
  if (arrivals.length < count) {
    return { verdict: "incomplete", message: `Only ${arrivals.length} of ${count} test frames arrived.`, expected };
  }
  const spread = Math.max(...arrivals) - Math.min(...arrivals);
  if (spread < expected * BUNCHED_RATIO) {
    return { verdict: "buffered", spread, expected,
             message: `Streaming check: ${count} frames sent over ${(expected / 1000).toFixed(1)} s arrived within ` +
                      `${(spread / 1000).toFixed(2)} s. ${FIX}` };
  }
  return { verdict: "ok", spread, expected, message: `Streaming works: frames arrived as sent (${(spread / 1000).toFixed(2)} s).` };
}

/** Run the self-test once; resolves to assess()'s result. */
export async function runStreamCheck({ timeoutMs = 20000 } = {}) {
  const arrivals = [];
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  try {
    const response = await request("GET", `/api/diagnostics/stream?count=${COUNT}&interval_ms=${INTERVAL_MS}`,
                                   { headers: { Accept: "text/event-stream" }, signal: controller.signal });
    if (!response.ok) return { verdict: "incomplete", message: `The self-test answered HTTP ${response.status}.` };
    await readSSE(response, (frame) => {
      if (frame.data && frame.data.startsWith("{")) arrivals.push(performance.now());
      return false;
    }, () => {});
  } catch (err) {
    /* judged below from what arrived */
  } finally {
    clearTimeout(timer);
  }
  return assess(arrivals);
}
