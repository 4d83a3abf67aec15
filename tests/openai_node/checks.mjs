// The official `openai` npm library against Odysseus's /v1 API (issue 33), run by tests/test_openai_node.py.
// Usage: node checks.mjs <scenario>; env: ODY_URL (the server), ODY_PROXY_URL (a cutting proxy in front of it),
// ODY_KEY (the API key), ODY_OTHER_KEY (another user's key, for the accounts scenario), ODY_MODEL.
// Prints one JSON object: what the scenario observed; the Python test asserts on it.
import OpenAI from "openai";

const MODEL = process.env.ODY_MODEL || "openai/m";
const TERMINAL = new Set(["response.completed", "response.incomplete", "response.failed", "response.cancelled"]);
const client = (url, options = {}) =>
  new OpenAI({ baseURL: `${url}/v1`, apiKey: options.key || process.env.ODY_KEY || "any-key", maxRetries: 0, ...options });
const direct = client(process.env.ODY_URL);

/** Read a stream (or its iterator, to go on reading later) into `events` until its terminal event (true),
 * `stopAfter` events in all, or the end of the connection (false). */
async function read(source, events, stopAfter = Infinity) {
  const iterator = source[Symbol.asyncIterator] ? source[Symbol.asyncIterator]() : source;
  try {
    for (;;) {
      const { value: event, done } = await iterator.next();
      if (done) return false;
      events.push(event);
      if (TERMINAL.has(event.type)) return true;
      if (events.length >= stopAfter) return false;
    }
  } catch (err) {
    if (!(err instanceof OpenAI.APIConnectionError || err?.name === "AbortError" || err instanceof TypeError)) throw err;
  }
  return false;
}

async function resume(api, id, events, attempts = 200) {
  for (let n = 1; n <= attempts; n++) {
    let stream;
    try {
      stream = await api.responses.retrieve(id, { stream: true, starting_after: events.at(-1).sequence_number });
    } catch (err) {
      if (err instanceof OpenAI.APIConnectionError) continue;
      throw err;
    }
    if (await read(stream, events)) return n;
  }
  throw new Error("no terminal event");
}

// the library adds `output_text` to what create and retrieve return, not to cancel's answer
const outText = (response) =>
  response.output
    .filter((item) => item.type === "message")
    .flatMap((item) => item.content)
    .filter((part) => part.type === "output_text")
    .map((part) => part.text)
    .join("");
const text = (events) => events.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta).join("");
const numbers = (events) => events.map((e) => e.sequence_number);
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

async function errorOf(promise) {
  try {
    await promise;
    return null;
  } catch (err) {
    return { name: err.constructor.name, status: err.status, code: err.code ?? err.error?.code ?? null, param: err.param ?? null };
  }
}

const scenarios = {
  async resume() {
    const events = [];
    const stream = await direct.responses.create({ model: MODEL, input: "long story via npm", background: true, stream: true });
    await read(stream, events, 10);
    stream.controller.abort(); // the client goes away after 10 events
    const id = events[0].response.id;
    const connections = await resume(client(process.env.ODY_PROXY_URL), id, events);
    const stored = await direct.responses.retrieve(id);
    return { connections, numbers: numbers(events), text: text(events), last: events.at(-1).type, stored: stored.output_text };
  },

  async retrieve_and_cancel() {
    const created = await direct.responses.create({ model: MODEL, input: "slow npm", background: true });
    let running = await direct.responses.retrieve(created.id);
    for (let n = 0; n < 100 && !running.output.length; n++) {
      await sleep(100);
      running = await direct.responses.retrieve(created.id);
    }
    const events = [];
    const stream = await direct.responses.retrieve(created.id, { stream: true });
    const iterator = stream[Symbol.asyncIterator]();
    await read(iterator, events, 8);
    const cancelled = await direct.responses.cancel(created.id);
    const again = await direct.responses.cancel(created.id);
    await read(iterator, events);
    return {
      running: { status: running.status, text: running.output_text },
      cancelled: { status: cancelled.status, text: outText(cancelled) },
      again: { status: again.status, text: outText(again) },
      last: events.at(-1).type,
      streamed: text(events),
    };
  },

  async chat() {
    const plain = await direct.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "npm hello" }] });
    const { data: _, response } = await direct.chat.completions
      .create({ model: MODEL, messages: [{ role: "user", content: "npm header" }] })
      .withResponse();
    const chunks = [];
    const stream = await direct.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "npm stream" }],
      stream: true,
      stream_options: { include_usage: true },
      max_completion_tokens: 40,
    });
    for await (const chunk of stream) chunks.push(chunk);
    return {
      plain: plain.choices[0].message.content,
      finish: plain.choices[0].finish_reason,
      runId: response.headers.get("x-odysseus-run-id"),
      streamed: chunks.map((c) => c.choices[0]?.delta?.content ?? "").join(""),
      usage: chunks.at(-1).usage,
      role: chunks[0].choices[0].delta.role,
    };
  },

  async tools() {
    const tools = [{ type: "function", name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } }];
    const first = await direct.responses.create({ model: MODEL, input: "weather via npm?", tools });
    const call = first.output.find((item) => item.type === "function_call");
    const second = await direct.responses.create({
      model: MODEL,
      previous_response_id: first.id,
      input: [{ type: "function_call_output", call_id: call.call_id, output: "foggy" }],
      tools,
    });
    const chatTools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object" } } }];
    const messages = [{ role: "user", content: "weather in npm chat?" }];
    const asked = await direct.chat.completions.create({ model: MODEL, messages, tools: chatTools });
    const chatCall = asked.choices[0].message.tool_calls[0];
    messages.push(asked.choices[0].message, { role: "tool", tool_call_id: chatCall.id, content: "windy" });
    const answered = await direct.chat.completions.create({ model: MODEL, messages, tools: chatTools });
    return {
      call: { name: call.name, call_id: call.call_id, arguments: JSON.parse(call.arguments) },
      answer: second.output_text,
      chatCall: { name: chatCall.function.name, finish: asked.choices[0].finish_reason },
      chatAnswer: answered.choices[0].message.content,
    };
  },

  async conversation() {
    const first = await direct.responses.create({ model: MODEL, input: "npm: I like tea" });
    const second = await direct.responses.create({ model: MODEL, input: "npm: what do I like?", previous_response_id: first.id });
    return { first: first.output_text, second: second.output_text, previous: second.previous_response_id, firstId: first.id };
  },

  async errors() {
    return {
      model: await errorOf(direct.responses.create({ model: "agent:no_such", input: "x" })),
      missing: await errorOf(direct.responses.retrieve("resp_nothing_here")),
      tokens: await errorOf(direct.responses.create({ model: MODEL, input: "x", max_output_tokens: 10 ** 12 })),
      empty: await errorOf(direct.responses.create({ model: MODEL, input: "" })),
      after: await errorOf(direct.responses.retrieve("resp_x", { stream: true, starting_after: "abc" })),
    };
  },

  async accounts() {
    const mine = await direct.responses.create({ model: MODEL, input: "npm secret" });
    const other = client(process.env.ODY_URL, { key: process.env.ODY_OTHER_KEY });
    const wrong = client(process.env.ODY_URL, { key: "ody_wrong" });
    return {
      mine: mine.output_text,
      otherRetrieve: await errorOf(other.responses.retrieve(mine.id)),
      otherCancel: await errorOf(other.responses.cancel(mine.id)),
      otherContinue: await errorOf(other.responses.create({ model: MODEL, input: "x", previous_response_id: mine.id })),
      wrongKey: await errorOf(wrong.models.list()),
    };
  },
};

const name = process.argv[2];
if (!scenarios[name]) {
  console.error(`unknown scenario ${name}; one of ${Object.keys(scenarios).join(", ")}`);
  process.exit(2);
}
console.log(JSON.stringify(await scenarios[name]()));
