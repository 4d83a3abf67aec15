// The explicit table of chat-stream events -> ReplyView handlers. One entry per line; a part of the
// page that adds an event adds its line here. An event with no entry is logged (console.debug),
// never silently dropped. Entries that deliberately do nothing say so. tests/test_event_vocabulary.py
// checks this table against odysseus/event_vocabulary.py: every chat-stream event has a line, no line
// names an event the chat stream does not send.

const ignore = () => {};

/** type -> (view, event) => void */
export const STREAM_HANDLERS = {
  delta: (view, event) => view.on_delta(event),
  model_info: (view, event) => view.on_model_info(event),
  fallback: (view, event) => view.on_fallback(event),
  usage: (view, event) => view.on_usage(event),
  metrics: (view, event) => view.on_metrics(event),
  notice: (view, event) => view.on_notice(event),
  message_saved: (view, event) => view.on_message_saved(event),
  chat_terminal: (view, event) => view.on_chat_terminal(event),
  agent_terminal: (view, event) => view.on_agent_terminal(event),
  done: (view, event) => view.on_done(event),
  error: (view, event) => view.on_error(event),
  run_timeout: ignore, // the terminal record that follows carries the outcome and its message
  // agent mode (agent_render.js)
  agent_prep: (view, event) => view.on_agent_prep(event),
  agent_step: (view, event) => view.on_agent_step(event),
  tool_start: (view, event) => view.on_tool_start(event),
  tool_progress: (view, event) => view.on_tool_progress(event),
  tool_output: (view, event) => view.on_tool_output(event),
  ask_user: (view, event) => view.on_ask_user(event),
  tool_approval_resolved: (view, event) => view.on_tool_approval_resolved(event),
  generated_image: (view, event) => view.on_generated_image(event),
  ui_control: (view, event) => view.on_ui_control(event),
  plan_update: (view, event) => view.on_plan_update(event),
  rounds_exhausted: (view, event) => view.on_rounds_exhausted(event),
  budget_exceeded: (view, event) => view.on_budget_exceeded(event),
  loop_breaker_triggered: (view, event) => view.on_loop_breaker_triggered(event),
  intent_nudge_exhausted: (view, event) => view.on_intent_nudge_exhausted(event),
  exhibit: (view, event) => view.on_exhibit(event),
  // editor documents (doc_render.js; the document panel also observes every event, see render.js)
  doc_stream_open: ignore, // the live preview belongs to the document panel (ctx.documents.observe)
  doc_stream_delta: ignore, // likewise
  doc_update: (view, event) => view.on_doc_update(event),
  doc_suggestions: (view, event) => view.on_doc_suggestions(event),
  // context the user brings (file_context_render.js, context_render.js)
  attachments: (view, event) => view.on_attachments(event),
  rag_sources: (view, event) => view.on_rag_sources(event),
  memories_used: (view, event) => view.on_memories_used(event),
  web_sources: (view, event) => view.on_web_sources(event),
  workspace_rejected: (view, event) => view.on_workspace_rejected(event),
  // the model's window (window_render.js)
  context_trimmed: (view, event) => view.on_context_trimmed(event),
  compacted: (view, event) => view.on_compacted(event),
  // research jobs (research_render.js)
  research_progress: (view, event) => view.on_research_progress(event),
  research_sources: (view, event) => view.on_research_sources(event),
  research_findings: (view, event) => view.on_research_findings(event),
  research_done: (view, event) => view.on_research_done(event),
  // Agent Alloy delegations (delegation_render.js)
  delegation_start: (view, event) => view.on_delegation_start(event),
  delegation_chunk: (view, event) => view.on_delegation_chunk(event),
  delegation_tool_call: (view, event) => view.on_delegation_tool_call(event),
  delegation_tool_result: (view, event) => view.on_delegation_tool_result(event),
  delegation_complete: (view, event) => view.on_delegation_complete(event),
};

/** Apply one event to a view through the table; unknown types are logged for whoever adds them. */
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
