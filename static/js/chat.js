// The page wiring: which element is which, the sessions (open, new, history), the chat/agent/compare
// switch, and how the parts are connected. The state lives in chat_state.js; sending, approvals and
// branches in turn_controller.js; streaming rules in stream.js, rendering in render.js / exhibits.js,
// requests in api.js; the chrome around the conversation (model picker, phone sidebar, theme,
// account, settings) in page_chrome.js.

import { api, request } from "./api.js";
import { DocumentPanel } from "./documents.js";
import { Attachments, showChips } from "./attachments.js";
import { ComposerInput } from "./composer_input.js";
import { addBranchPager } from "./branches.js";
import { ChatState } from "./chat_state.js";
import { Compare } from "./compare.js";
import { ContextControls } from "./context_controls.js";
import { openEditForm } from "./edit_form.js";
import { HistoryPager, PAGE_SIZE } from "./history_pager.js";
import { PageChrome } from "./page_chrome.js";
import { pageMenuItems } from "./page_menu.js";
import { openMenu } from "./popup_menu.js";
import { PromptMenu } from "./prompt_menu.js";
import { ReplyView, UserView } from "./render.js";
import { CodeToolsNotice, checkStreamingOnce } from "./page_notices.js";
import { openResearchList, researchToggle } from "./research.js";
import { Search } from "./search.js";
import { installShortcuts } from "./shortcuts.js";
import { Sidebar } from "./sidebar.js";
import { TurnController } from "./turn_controller.js";
import { applyUiControl } from "./ui_control.js";
import { Workflows } from "./workflows.js";
import { ContextMeter, summaryDivider } from "./window_render.js";

const $ = (id) => document.getElementById(id);
const ui = {
  app: $("app"), sidebar: $("sidebar"), sessionList: $("session-list"), newChat: $("new-chat"),
  openSidebar: $("open-sidebar"), closeSidebar: $("close-sidebar"), title: $("session-title"),
  model: /** @type {HTMLSelectElement} */ ($("model-picker")), messages: $("messages"),
  composer: /** @type {HTMLFormElement} */ ($("composer")), input: /** @type {HTMLTextAreaElement} */ ($("input")),
  send: $("send"), theme: $("theme-toggle"), modal: /** @type {HTMLDialogElement} */ ($("modal")), toast: $("toast"),
  empty: $("empty-state"), account: $("account"), accountName: $("account-name"),
  signOut: /** @type {HTMLButtonElement} */ ($("sign-out")),
  research: $("research-toggle"), workflowChoice: /** @type {HTMLElement} */ (document.querySelector(".workflow-choice")),
  workflow: /** @type {HTMLSelectElement} */ ($("workflow-picker")), manageWorkflows: $("manage-workflows"),
  search: $("search"), searchResults: $("search-results"), settings: $("open-settings"),
  apiSessions: /** @type {HTMLInputElement} */ ($("api-sessions")),
  importFile: /** @type {HTMLInputElement} */ ($("import-file")), export: $("export"),
  exportMd: /** @type {HTMLAnchorElement} */ ($("export-md")),
  exportJson: /** @type {HTMLAnchorElement} */ ($("export-json")), note: $("composer-note"),
  charCount: $("char-count"), streamWarning: $("stream-warning"),
  codeNotice: $("code-tools-notice"),
  newFolder: $("new-folder"), archivedView: $("archived-view"), chatMenu: $("chat-menu"),
};

const state = new ChatState();
const MAX_CHARS = Number(document.body.dataset.maxMessageChars) || 200000;
const meter = new ContextMeter($("context-meter")); // the model's window (window_render.js)
// Compare mode (compare.js): side-by-side replies; `ctx` is read when a pane is made
const compare = new Compare({
  picker: $("compare-picker"), messages: ui.messages, ctx: () => ctx,
  models: () => state.models, sessionId: () => state.sessionId, onChange: () => updateComposer(),
  onSession: (sessionId) => { // the comparison's question created the session: a reload comes back to it
    if (state.sessionId) return;
    state.sessionId = sessionId;
    setUrl(sessionId);
    refreshSessions();
  },
  onKept: async (sessionId) => { await refreshSessions(); await openSession(sessionId); },
  toast: (text) => toast(text),
});
const documents = new DocumentPanel($("doc-panel"), { toast: (text) => toast(text) });
const attachments = new Attachments({ // composer uploads (attachments.js)
  tray: $("attach-tray"), button: $("attach"), input: $("attach-input"), dropZone: ui.app, pasteTarget: ui.input,
  toast: (text) => toast(text),
});

// ---- small helpers -------------------------------------------------------------------------

let toastTimer = 0;
function toast(text) {
  ui.toast.textContent = text;
  ui.toast.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { ui.toast.hidden = true; }, 5000);
}

function nearBottom() {
  const box = ui.messages;
  return box.scrollHeight - box.scrollTop - box.clientHeight < 120;
}

let stick = true;
ui.messages.addEventListener("scroll", () => { stick = nearBottom(); });
function grow() {
  if (stick) ui.messages.scrollTop = ui.messages.scrollHeight;
}
/** Follow the list to its end again (a message was sent or a session opened). */
function scrollToEnd() {
  stick = true;
  grow();
}

function mode() {
  const checked = /** @type {HTMLInputElement | null} */ (document.querySelector('input[name="mode"]:checked'));
  return checked ? checked.value : "chat";
}

const codeTools = new CodeToolsNotice(ui.codeNotice, mode); // why run_python / shell are off (agent mode)

function setMode(value) {
  const radio = /** @type {HTMLInputElement | null} */ (
    document.querySelector(`input[name="mode"][value="${CSS.escape(String(value))}"]`));
  if (radio) {
    radio.checked = true;
    localStorage.setItem("odysseus-mode", radio.value);
  }
  codeTools.show();
  compare.renderPicker(mode() === "compare");
  showWorkflowChoice();
}
/** The workflow picker shows in the Workflow mode only. */
function showWorkflowChoice() {
  ui.workflowChoice.hidden = mode() !== "workflow";
}
// The mode is remembered across reloads, like the model: a reloaded agent task stays in agent mode.
for (const radio of /** @type {NodeListOf<HTMLInputElement>} */ (document.querySelectorAll('input[name="mode"]'))) {
  radio.addEventListener("change", () => { if (radio.checked) localStorage.setItem("odysseus-mode", radio.value); });
  radio.addEventListener("change", () => codeTools.show());
  radio.addEventListener("change", () => compare.renderPicker(mode() === "compare"));
  radio.addEventListener("change", showWorkflowChoice);
}
if (localStorage.getItem("odysseus-mode")) setMode(localStorage.getItem("odysseus-mode"));

// The Research toggle and the research job list (research.js; the list opens from the "⋯" menu).
const research = researchToggle(ui.research);
const showResearchList = () => openResearchList({
  openModal, closeModal: () => ui.modal.close(), openSession: (id) => openSession(id), toast,
});

const running = () => turns.running();

function updateComposer() {
  const busy = running();
  ui.send.dataset.state = busy ? "stop" : "send";
  ui.send.textContent = busy ? "Stop" : "Send";
  ui.send.setAttribute("aria-label", busy ? "Stop the reply" : "Send message");
  ui.app.dataset.running = busy ? "true" : "false";
}

function setUrl(sessionId) {
  const url = sessionId ? `/?session=${encodeURIComponent(sessionId)}` : "/";
  if (location.pathname + location.search !== url) history.replaceState(null, "", url);
  if (sessionId) {
    const base = `/api/sessions/${encodeURIComponent(sessionId)}/export?format=`;
    ui.exportMd.href = base + "md";
    ui.exportJson.href = base + "json";
  }
}

function showEmpty() {
  ui.empty.hidden = ui.messages.querySelector(".msg") !== null;
}

// ---- views and what their buttons do ---------------------------------------------------------

/** @type {import("./render.js").ViewContext & Record<string, any>} */
const ctx = {
  onGrow: grow,
  onChoice: (text) => send(text),
  onContinue: () => send("Continue", { mode: "agent", extra: { continue: true } }),
  onApproval: (data, decision) => {
    const words = { approve: "Approve", approve_task: "Approve for this task", deny: "Deny" };
    // The run that asked is waiting for this answer: if its stream is still open, drop only the
    // connection (never Stop) and send the answer, which continues the task.
    if (running()) detachTurn();
    return send(words[decision] || decision, {
      mode: "agent", showUser: false,
      extra: { tool_approval_id: data.approval_id, tool_approval_decision: decision },
    });
  },
  openModal,
  uiControl,
  onEdit: editMessage,
  onDelete: deleteMessage,
  onRegenerate: (view) => turns.regenerateReply(view),
  // rating_render.js: thumbs up or down on a saved reply (null removes the rating)
  onRate: (view, rating) => rating ? api("PUT", `/api/messages/${view.id}/rating`, rating)
    : api("DELETE", `/api/messages/${view.id}/rating`),
  documents,
  onWorkspaceRejected: (path) => controls.rejected(path),
};

function openModal(title, node) {
  ui.modal.querySelector(".modal-title").textContent = title;
  const body = ui.modal.querySelector(".modal-body");
  body.textContent = "";
  body.appendChild(node);
  ui.modal.showModal();
}
ui.modal.querySelector(".modal-close").addEventListener("click", () => ui.modal.close());

// Agent Alloy (workflows.js): a picked workflow answers agent turns through its supervisor.
const workflows = new Workflows({
  select: ui.workflow, manage: ui.manageWorkflows, openModal, closeModal: () => ui.modal.close(), toast,
  onPick: () => setMode("workflow"),
  openAgents: () => pageChrome.openSettings("settings-agents"), // agents are made in Settings → Agents
});

/** Apply a `ui_control` action (ui_control.js). */
function uiControl(data) {
  applyUiControl(data, { setMode, modelPicker: ui.model, input: ui.input, toast, openSession });
}

function editMessage(view) {
  openEditForm(view, { resend: (edited, text) => turns.resendEdited(edited, text), toast });
}

async function deleteMessage(view) {
  if (!confirm("Delete this message?")) return;
  try {
    await api("DELETE", `/api/messages/${view.id}`);
    view.el.remove();
    showEmpty();
  } catch (err) {
    toast(`Could not delete: ${err.message}`);
  }
}

// ---- sessions (sidebar.js) ------------------------------------------------------------------

const sidebar = new Sidebar(ui.sessionList, {
  current: () => state.sessionId,
  onOpen: (id) => openSession(id),
  onDeleted: (id) => { if (id === state.sessionId) newChat(); },
  onTitle: (title) => { ui.title.textContent = title || "New chat"; },
  toast,
});
const refreshSessions = () => sidebar.refresh();
// The "API conversations" toggle: the sidebar lists the /v1 API's conversations instead of the page's chats.
ui.apiSessions.checked = sidebar.origin === "api";
ui.apiSessions.addEventListener("change", () => sidebar.setOrigin(ui.apiSessions.checked ? "api" : "page"));
// Organising chats (sidebar.js): a new folder, the Archived view, the open chat's "⋯" menu in the header.
ui.newFolder.addEventListener("click", async () => {
  if (sidebar.archived) await showArchived(false);
  sidebar.folders.create();
});
ui.archivedView.addEventListener("click", () => showArchived(ui.archivedView.getAttribute("aria-pressed") !== "true"));
function showArchived(on) {
  ui.archivedView.setAttribute("aria-pressed", on ? "true" : "false");
  return sidebar.setArchived(on);
}
// The header's one "⋯" menu (page_menu.js): the open chat's actions, export, workflows, research jobs.
ui.chatMenu.addEventListener("click", async () => {
  const sessionId = state.sessionId;
  let session = null;
  if (sessionId) {
    try {
      session = await api("GET", `/api/sessions/${encodeURIComponent(sessionId)}`);
    } catch (err) {
      toast(`Could not read the chat: ${err.message}`);
    }
  }
  openMenu(ui.chatMenu, "More", pageMenuItems({
    session, chatActions: sidebar.actions,
    rename: (chat) => renameChat(chat), remove: (chat) => sidebar.remove(chat),
    exportLinks: { md: ui.exportMd, json: ui.exportJson },
    workflows: { list: workflows.list, value: () => workflows.value(), pick: (id) => workflows.pick(id),
                 openScreen: () => workflows.openScreen() },
    openResearchList: showResearchList,
  }), () => sidebar.flush());
});
/** Rename the open chat from the header's menu (the sidebar renames in place). */
async function renameChat(session) {
  const title = prompt("Rename the chat", session.title);
  if (title === null || !title.trim() || title.trim() === session.title) return;
  await sidebar.actions.update(session, { title: title.trim() }, "Renamed.");
  ui.title.textContent = title.trim();
}
// Web toggle, workspace picker and the memories screen (context_controls.js).
const controls = new ContextControls({ openModal, toast });
const renderSessions = () => sidebar.render();

function detachTurn() {
  compare.abandon(); // leaving a comparison stops its streams
  if (state.turn && !state.turn.finished) {
    state.turn.detach();
    sidebar.forget(state.turn.sessionId);
  }
  state.turn = null;
  updateComposer();
}

function newChat() {
  state.beginLoad();
  detachTurn();
  state.sessionId = null;
  setUrl(null);
  ui.messages.querySelectorAll(".msg, .summary-divider").forEach((node) => node.remove());
  documents.reset();
  meter.clear();
  pager.clear();
  renderSessions();
  showEmpty();
  pageChrome.closeSidebarOnPhone();
  ui.input.focus();
}

/** Show a session: its history, then attach to its run if one is going (rendered once). */
async function openSession(sessionId) {
  const token = state.beginLoad();
  detachTurn();
  state.sessionId = sessionId;
  setUrl(sessionId);
  renderSessions();
  pageChrome.closeSidebarOnPhone();
  ui.messages.querySelectorAll(".msg, .summary-divider").forEach((node) => node.remove());
  pager.clear();
  state.answered = new Set();
  ui.messages.setAttribute("aria-busy", "true");
  let status = null;
  let data;
  try {
    // Status first: if the run finishes between the two requests, its saved reply is skipped
    // below and replayed from the run log instead, so it is shown exactly once.
    const response = await request("GET", `/api/chat/stream_status/${encodeURIComponent(sessionId)}`);
    if (response.ok) status = await response.json();
    data = await api("GET", `/api/sessions/${encodeURIComponent(sessionId)}/messages?limit=${PAGE_SIZE}`);
    if (state.isCurrent(token)) await documents.loadSession(sessionId); // its active document, if any
  } catch (err) {
    if (!state.isCurrent(token)) return;
    ui.messages.removeAttribute("aria-busy");
    toast(`Could not open the session: ${err.message}`);
    if (err.status === 404) newChat();
    return;
  }
  if (!state.isCurrent(token)) return;
  ui.messages.removeAttribute("aria-busy");
  const live = status && status.status === "running" && status.resumable ? status : null;
  renderHistory(data.messages.filter((m) => !(live && m.role === "assistant" && m.run_id === live.run_id)));
  meter.refresh(sessionId, ui.model.value);
  pager.reset(sessionId, data);
  showEmpty();
  scrollToEnd();
  if (live) {
    const reply = new ReplyView(ctx);
    ui.messages.appendChild(reply.el);
    state.turn = turns.makeTurn({ sessionId, runId: live.run_id, reply });
    updateComposer();
    sidebar.setRunning(sessionId, true);
    state.turn.attach();
  }
}

/**
 * Saved messages, shown as a live turn showed them: an approval answer is a continuation (no
 * user bubble), answered approval cards are gone, and choices and Continue are settled once a
 * later message exists. They go at the end, or above `before` (an older page, whose first later
 * message is `next`).
 */
function renderHistory(messages, before = null, next = null) {
  const answered = state.answered;
  for (const message of messages) {
    const action = (message.metadata || {}).agent_action || {};
    if (action.tool_approval && action.tool_approval.approval_id) answered.add(action.tool_approval.approval_id);
  }
  let replies = [];
  const put = (node) => ui.messages.insertBefore(node, before);
  for (const message of messages) {
    if (message.role === "user") {
      for (const reply of replies) reply.settle(message.content);
      replies = [];
      if (((message.metadata || {}).agent_action || {}).tool_approval) continue;
      const view = new UserView(message.content, ctx, { id: message.id });
      showChips(view.el, (message.metadata || {}).attachments);
      addBranchPager(view, message.branch, showBranch);
      put(view.el);
    } else if (message.role === "assistant") {
      const reply = ReplyView.fromMessage(message, ctx, { answered });
      addBranchPager(reply, message.branch, showBranch);
      replies.push(reply);
      put(reply.el);
    } else if (message.role === "system" && (message.metadata || {}).compacted) {
      put(summaryDivider(message.content, (message.metadata.summarized_ids || []).length, message.id));
    }
  }
  if (next && next.role === "user") for (const reply of replies) reply.settle(next.content);
}

const pager = new HistoryPager(ui.messages, {
  render: renderHistory,
  onError: (err) => toast(`Could not load earlier messages: ${err.message}`),
});

// ---- sending, approvals and branches (turn_controller.js) -----------------------------------------

const turns = new TurnController({
  state, messages: ui.messages, ctx: () => ctx, mode, maxChars: MAX_CHARS, compare, attachments, controls, research,
  documents, workflows, sidebar, composer: () => composer, input: ui.input, modelPicker: ui.model, note: ui.note, toast,
  showEmpty, scrollToEnd, updateComposer, setUrl, openSession,
  refreshMeter: (sessionId) => meter.refresh(sessionId, ui.model.value),
  watchTitle: (sessionId) => watchTitle(sessionId),
});
const send = (text, options) => turns.send(text, options);
const showBranch = (messageId) => turns.showBranch(messageId);

// The `/` menu of saved prompts (prompt_menu.js) sees the box's keys before the composer does.
const promptMenu = new PromptMenu({ input: ui.input, list: $("prompt-menu"), openModal, modal: ui.modal, toast });
// The composer's text box (composer_input.js): Send/Stop, Enter, the character count and its notes.
const composer = new ComposerInput({
  form: ui.composer, input: ui.input, note: ui.note, charCount: ui.charCount, maxChars: MAX_CHARS, running,
  stop: () => turns.stop(),
  send: (text) => send(text),
  keys: (event) => promptMenu.handleKey(event),
});
// Esc stops the running reply, `?` lists the shortcuts (shortcuts.js).
installShortcuts({ running, stop: () => turns.stop(), openModal, modal: ui.modal });

// ---- the chrome: model picker, phone sidebar, theme, account, import, settings (page_chrome.js)

const pageChrome = new PageChrome({
  ui, state, toast, compare, mode, setMode, controls, detachTurn, newChat, refreshSessions, openSession, openModal,
});

// ---- titles and search ------------------------------------------------------------------------

/** The server writes a title after the first reply (in the background): look a few times, then stop. */
async function watchTitle(sessionId) {
  const before = sidebar.find(sessionId)?.title;
  for (const wait of [800, 1500, 3000, 6000]) {
    await new Promise((resolve) => setTimeout(resolve, wait));
    try {
      const session = await api("GET", `/api/sessions/${encodeURIComponent(sessionId)}`);
      if (before === undefined || session.title !== before) {
        await refreshSessions();
        if (session.title !== before) return;
      }
    } catch (err) {
      return;
    }
  }
}

const search = new Search({
  input: ui.search, list: ui.searchResults, sessions: ui.sessionList, toast,
  onOpen: async (sessionId, messageId) => {
    await openSession(sessionId);
    const node = ui.messages.querySelector(`.msg[data-message-id="${CSS.escape(String(messageId))}"]`);
    if (node) {
      node.scrollIntoView({ block: "center" });
      node.classList.add("found");
      setTimeout(() => node.classList.remove("found"), 2500);
    }
  },
});

// ---- start -------------------------------------------------------------------------------------

async function start() {
  pageChrome.themeLabel();
  updateComposer();
  showEmpty();
  const [, , , prefs] = await Promise.all([pageChrome.loadModels(), refreshSessions(), pageChrome.loadAccount(),
                                          api("GET", "/api/user/settings").catch(() => null), workflows.load(),
                                          codeTools.load()]);
  pageChrome.applySettings(prefs && prefs.settings, { initial: true });
  const wanted = new URLSearchParams(location.search).get("session");
  if (wanted) await openSession(wanted);
  document.body.dataset.ready = "true";
  checkStreamingOnce(ui.streamWarning);
}

// Test and debugging handle; the page never reads it itself.
window.odysseus = { state, send, openSession, newChat, documents, controls, search };
start();
