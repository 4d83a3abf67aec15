// The explicit table of chat-stream events -> the handler object that draws each: the ReplyView
// itself (text, usage, outcome) or one of its parts (view.agent, view.docs, view.files, view.context,
// view.window, view.research, view.delegation; see render.js). One entry per line; a part of the
// page that adds an event adds its line here. An event with no entry is logged (console.debug),
// never silently dropped. Entries that deliberately do nothing say so. tests/test_event_vocabulary.py
// checks this table against odysseus/event_vocabulary.py: every chat-stream event has a line, no line
// names an event the chat stream does not send.

/** @typedef {import("./render.js").ReplyView} ReplyView */
/** @typedef {import("./render.js").StreamEvent} StreamEvent */
/** @typedef {(view: ReplyView, event: StreamEvent) => void} StreamHandler */

/** @type {StreamHandler} */
const ignore = () => {};

/** @type {Readonly<Record<string, StreamHandler>>} type -> the call that applies it to a reply */
export const STREAM_HANDLERS = {
  delta: (view, event) => view.on_delta(event),
  model_info: (view, event) => view.on_model_info(event),
  fallback: (view, event) => view.on_fallback(event),
  usage: (view, event) => view.on_usage(event),
  metrics: (view, event) => view.on_metrics(event),
  notice: (view, event) => view.context.on_notice(event),
  message_saved: (view, event) => view.on_message_saved(event),
  chat_terminal: (view, event) => view.on_chat_terminal(event),
  agent_terminal: (view, event) => view.on_agent_terminal(event),
  done: (view, event) => view.on_done(event),
  error: (view, event) => view.on_error(event),
  run_timeout: ignore, // the terminal record that follows carries the outcome and its message
  // agent mode (agent_render.js)
  agent_prep: (view, event) => view.agent.on_agent_prep(event),
  agent_step: (view, event) => view.agent.on_agent_step(event),
  tool_start: (view, event) => view.agent.on_tool_start(event),
  tool_progress: (view, event) => view.agent.on_tool_progress(event),
  tool_output: (view, event) => view.agent.on_tool_output(event),
  ask_user: (view, event) => view.agent.on_ask_user(event),
  tool_approval_resolved: (view, event) => view.agent.on_tool_approval_resolved(event),
  generated_image: (view, event) => view.agent.on_generated_image(event),
  ui_control: (view, event) => view.agent.on_ui_control(event),
  plan_update: (view, event) => view.agent.on_plan_update(event),
  rounds_exhausted: (view, event) => view.agent.on_rounds_exhausted(event),
  budget_exceeded: (view, event) => view.agent.on_budget_exceeded(event),
  loop_breaker_triggered: (view, event) => view.agent.on_loop_breaker_triggered(event),
  intent_nudge_exhausted: (view, event) => view.agent.on_intent_nudge_exhausted(event),
  exhibit: (view, event) => view.agent.on_exhibit(event),
  // editor documents (doc_render.js; the document panel also observes every event, see render.js)
  doc_stream_open: ignore, // the live preview belongs to the document panel (ctx.documents.observe)
  doc_stream_delta: ignore, // likewise
  doc_update: (view, event) => view.docs.on_doc_update(event),
  doc_suggestions: (view, event) => view.docs.on_doc_suggestions(event),
  // context the user brings (file_context_render.js, context_render.js)
  attachments: (view, event) => view.files.on_attachments(event),
  rag_sources: (view, event) => view.files.on_rag_sources(event),
  memories_used: (view, event) => view.context.on_memories_used(event),
  web_sources: (view, event) => view.context.on_web_sources(event),
  workspace_rejected: (view, event) => view.context.on_workspace_rejected(event),
  // the model's window (window_render.js)
  context_trimmed: (view, event) => view.window.on_context_trimmed(event),
  compacted: (view, event) => view.window.on_compacted(event),
  // research jobs (research_render.js)
  research_progress: (view, event) => view.research.on_research_progress(event),
  research_sources: (view, event) => view.research.on_research_sources(event),
  research_findings: (view, event) => view.research.on_research_findings(event),
  research_done: (view, event) => view.research.on_research_done(event),
  // Agent Alloy delegations (delegation_render.js)
  delegation_start: (view, event) => view.delegation.on_delegation_start(event),
  delegation_chunk: (view, event) => view.delegation.on_delegation_chunk(event),
  delegation_tool_call: (view, event) => view.delegation.on_delegation_tool_call(event),
  delegation_tool_result: (view, event) => view.delegation.on_delegation_tool_result(event),
  delegation_complete: (view, event) => view.delegation.on_delegation_complete(event),
};

/**
 * Apply one event to a view through the table; unknown types are logged for whoever adds them.
 * @param {ReplyView} view
 * @param {StreamEvent} event
 */
export function dispatch(view, event) {
  const handler = Object.prototype.hasOwnProperty.call(STREAM_HANDLERS, event.type) ? STREAM_HANDLERS[event.type] : null;
  if (!handler) {
    console.debug("unhandled stream event", event.type, event);
    return;
  }
  try {
    handler(view, event);
  } catch (err) {
    console.error("stream event handler failed", event.type, err); // one bad event must not stop the rest
  }
}
