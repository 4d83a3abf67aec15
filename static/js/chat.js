// The page: sidebar of sessions, model picker, chat/agent switch, message list and composer.
// Streaming rules live in stream.js, rendering in render.js / exhibits.js, requests in api.js.

import { api, request } from "./api.js";
import { DocumentPanel } from "./documents.js";
import { Attachments, showChips } from "./attachments.js";
import { ContextControls } from "./context_controls.js";
import { HistoryPager, PAGE_SIZE } from "./history_pager.js";
import { ReplyView, UserView } from "./render.js";
import { Sidebar } from "./sidebar.js";
import { Turn } from "./stream.js";

const $ = (id) => document.getElementById(id);
const ui = {
  app: $("app"), sidebar: $("sidebar"), sessionList: $("session-list"), newChat: $("new-chat"),
  openSidebar: $("open-sidebar"), closeSidebar: $("close-sidebar"), title: $("session-title"),
  model: $("model-picker"), messages: $("messages"), composer: $("composer"), input: $("input"),
  send: $("send"), theme: $("theme-toggle"), modal: $("modal"), toast: $("toast"), empty: $("empty-state"),
  account: $("account"), accountName: $("account-name"), signOut: $("sign-out"),
  codeNotice: $("code-tools-notice"),
};

// answered: approval ids answered anywhere in the loaded history (older pages render after newer ones)
const state = { sessionId: null, turn: null, loadToken: 0, answered: new Set(), codeToolsOff: "" };
const documents = new DocumentPanel($("doc-panel"), { toast: (text) => toast(text) });
const attachments = new Attachments({ // composer uploads (attachments.js)
  tray: $("attach-tray"), button: $("attach"), input: $("attach-input"), dropZone: ui.app, pasteTarget: ui.input,
  toast: (text) => toast(text),
});

// ---- small helpers -------------------------------------------------------------------------

function toast(text) {
  ui.toast.textContent = text;
  ui.toast.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { ui.toast.hidden = true; }, 5000);
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

function mode() {
  const checked = document.querySelector('input[name="mode"]:checked');
  return checked ? checked.value : "chat";
}

function setMode(value) {
  const radio = document.querySelector(`input[name="mode"][value="${CSS.escape(String(value))}"]`);
  if (radio) {
    radio.checked = true;
    localStorage.setItem("odysseus-mode", radio.value);
  }
  showCodeNotice();
}
// The mode is remembered across reloads, like the model: a reloaded agent task stays in agent mode.
for (const radio of document.querySelectorAll('input[name="mode"]')) {
  radio.addEventListener("change", () => { if (radio.checked) localStorage.setItem("odysseus-mode", radio.value); });
}
if (localStorage.getItem("odysseus-mode")) setMode(localStorage.getItem("odysseus-mode"));

function newClientId() {
  return (crypto.randomUUID && crypto.randomUUID()) || `c${Date.now()}${Math.random().toString(16).slice(2)}`;
}

function running() {
  return !!(state.turn && !state.turn.finished);
}

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
}

function showEmpty() {
  ui.empty.hidden = ui.messages.querySelector(".msg") !== null;
}

// ---- views and what their buttons do ---------------------------------------------------------

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

/** Apply a `ui_control` action (documented in docs/protocol-frontend.md); unknown ones are ignored. */
function uiControl(data) {
  switch (data.action) {
    case "set_theme":
      window.odysseusTheme.set(data.theme === "auto" ? "" : data.theme);
      break;
    case "set_mode":
      setMode(data.mode);
      break;
    case "select_model":
      if ([...ui.model.options].some((o) => o.value === data.model)) ui.model.value = data.model;
      break;
    case "notify":
      toast(String(data.message || ""));
      break;
    case "prefill":
      ui.input.value = String(data.text || "");
      ui.input.focus();
      break;
    case "open_session":
      if (data.session_id) openSession(String(data.session_id));
      break;
    default:
      console.debug("ignored ui_control", data);
  }
}

function editMessage(view) {
  if (view.editing) return;
  view.editing = true;
  const form = document.createElement("form");
  form.className = "edit-form";
  const area = document.createElement("textarea");
  area.value = view.text;
  area.setAttribute("aria-label", "Edit message");
  const save = Object.assign(document.createElement("button"), { type: "submit", textContent: "Save" });
  const cancel = Object.assign(document.createElement("button"), { type: "button", textContent: "Cancel" });
  form.append(area, save, cancel);
  view.body.hidden = true;
  view.body.after(form);
  area.focus();
  const close = () => { form.remove(); view.body.hidden = false; view.editing = false; };
  cancel.addEventListener("click", close);
  form.addEventListener("keydown", (e) => { if (e.key === "Escape") close(); });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const saved = await api("PATCH", `/api/messages/${view.id}`, { content: area.value });
      view.setText(saved.content ?? area.value);
      close();
    } catch (err) {
      toast(`Could not save: ${err.message}`);
    }
  });
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
// Web toggle, workspace picker and the memories screen (context_controls.js).
const controls = new ContextControls({ openModal, toast });
const renderSessions = () => sidebar.render();

function detachTurn() {
  if (state.turn && !state.turn.finished) {
    state.turn.detach();
    sidebar.forget(state.turn.sessionId);
  }
  state.turn = null;
  updateComposer();
}

function newChat() {
  state.loadToken += 1;
  detachTurn();
  state.sessionId = null;
  setUrl(null);
  ui.messages.querySelectorAll(".msg").forEach((node) => node.remove());
  documents.reset();
  pager.clear();
  renderSessions();
  showEmpty();
  closeSidebarOnPhone();
  ui.input.focus();
}

/** Show a session: its history, then attach to its run if one is going (rendered once). */
async function openSession(sessionId) {
  const token = ++state.loadToken;
  detachTurn();
  state.sessionId = sessionId;
  setUrl(sessionId);
  renderSessions();
  closeSidebarOnPhone();
  ui.messages.querySelectorAll(".msg").forEach((node) => node.remove());
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
    if (token === state.loadToken) await documents.loadSession(sessionId); // its active document, if any
  } catch (err) {
    if (token !== state.loadToken) return;
    ui.messages.removeAttribute("aria-busy");
    toast(`Could not open the session: ${err.message}`);
    if (err.status === 404) newChat();
    return;
  }
  if (token !== state.loadToken) return;
  ui.messages.removeAttribute("aria-busy");
  const live = status && status.status === "running" && status.resumable ? status : null;
  renderHistory(data.messages.filter((m) => !(live && m.role === "assistant" && m.run_id === live.run_id)));
  pager.reset(sessionId, data);
  showEmpty();
  stick = true;
  grow();
  if (live) {
    const reply = new ReplyView(ctx);
    ui.messages.appendChild(reply.el);
    state.turn = makeTurn({ sessionId, runId: live.run_id, reply });
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
      put(view.el);
    } else if (message.role === "assistant") {
      const reply = ReplyView.fromMessage(message, ctx, { answered });
      replies.push(reply);
      put(reply.el);
    }
  }
  if (next && next.role === "user") for (const reply of replies) reply.settle(next.content);
}

const pager = new HistoryPager(ui.messages, {
  render: renderHistory,
  onError: (err) => toast(`Could not load earlier messages: ${err.message}`),
});

/** A new message settles the choices and Continue buttons of the replies above it. */
function settleReplies(text) {
  for (const node of ui.messages.querySelectorAll(".msg.assistant")) node.replyView?.settle(text);
}

// ---- sending ---------------------------------------------------------------------------------

function makeTurn(options) {
  return new Turn({
    ...options,
    stallMs: Number(document.body.dataset.stallMs) || 45000,
    onSession: (sessionId, turn) => {
      if (state.turn === turn && !state.sessionId) {
        state.sessionId = sessionId;
        setUrl(sessionId);
      }
      sidebar.setRunning(sessionId, true);
      refreshSessions();
    },
    onReplaced: (saved, turn) => {
      const view = ReplyView.fromMessage(saved, ctx);
      turn.reply.el.replaceWith(view.el);
      turn.reply = view;
    },
    onFinish: (turn) => {
      if (state.turn === turn) updateComposer();
      sidebar.setRunning(turn.sessionId, false); // also reloads the list (titles, order, runs)
      if (turn.sessionId === state.sessionId) assignIds(turn);
    },
  });
}

/** Give freshly sent user messages their database ids, so edit and delete work at once. */
async function assignIds(turn) {
  if (!turn.userView || turn.userView.id !== null) return;
  try {
    const data = await api("GET", `/api/sessions/${encodeURIComponent(turn.sessionId)}/messages`);
    const row = data.messages.find((m) => m.role === "user" && m.client_message_id === turn.userView.clientId);
    if (row) turn.userView.setMessageId(row.id);
  } catch (err) {
    /* edit/delete appear after the next load */
  }
}

/** Send `text` as the next message (or an approval answer when showUser is false). */
function send(text, { mode: sendMode = mode(), extra = {}, showUser = true } = {}) {
  if (!text.trim()) return false;
  if (running()) {
    toast("Wait for the reply to finish, or press Stop, before sending.");
    return false;
  }
  if (showUser && attachments.busy) {
    toast("Wait for the uploads to finish before sending.");
    return false;
  }
  settleReplies(text);
  const clientId = newClientId();
  let userView = null;
  const files = showUser ? attachments.take() : [];
  if (files.length) extra = { ...extra, attachments: files.map((f) => f.id) };
  if (showUser) {
    userView = new UserView(text, ctx, { clientId });
    showChips(userView.el, files);
    ui.messages.appendChild(userView.el);
  }
  const reply = new ReplyView(ctx);
  ui.messages.appendChild(reply.el);
  showEmpty();
  stick = true;
  grow();
  const turn = makeTurn({ sessionId: state.sessionId, reply });
  turn.userView = userView;
  state.turn = turn;
  updateComposer();
  const body = { message: text, mode: sendMode, client_message_id: clientId, ...controls.turnFields(sendMode), ...extra };
  if (state.sessionId) {
    body.session = state.sessionId;
    sidebar.setRunning(state.sessionId, true);
  }
  if (ui.model.value) body.model = ui.model.value;
  const docId = documents.activeDocId(); // an open document goes with the turn
  if (docId) body.active_doc_id = docId;
  turn.send(body);
  return true;
}

ui.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  if (running()) {
    state.turn.stop();
    return;
  }
  const text = ui.input.value;
  if (!text.trim()) return;
  if (!send(text)) return; // refused (e.g. uploads still going): keep the text
  ui.input.value = "";
  autosize();
});

ui.input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    if (!running()) ui.composer.requestSubmit();
  }
});

function autosize() {
  ui.input.style.height = "auto";
  ui.input.style.height = `${Math.min(ui.input.scrollHeight, 240)}px`;
}
ui.input.addEventListener("input", autosize);

// ---- models, layout, theme ---------------------------------------------------------------------

async function loadModels() {
  try {
    const data = await api("GET", "/api/models");
    ui.model.textContent = "";
    for (const model of data.models) {
      ui.model.appendChild(new Option(model.id, model.id));
    }
    for (const failure of data.errors || []) {
      const option = new Option(`${failure.provider}: unavailable`, "");
      option.disabled = true;
      option.title = failure.error;
      ui.model.appendChild(option);
    }
    const saved = localStorage.getItem("odysseus-model");
    if (saved && data.models.some((m) => m.id === saved)) ui.model.value = saved;
  } catch (err) {
    toast(`Could not load models: ${err.message}`);
  }
}
ui.model.addEventListener("change", () => localStorage.setItem("odysseus-model", ui.model.value));

function closeSidebarOnPhone() {
  ui.app.classList.remove("sidebar-open");
  ui.openSidebar.setAttribute("aria-expanded", "false");
}
ui.openSidebar.addEventListener("click", () => {
  ui.app.classList.add("sidebar-open");
  ui.openSidebar.setAttribute("aria-expanded", "true");
  ui.newChat.focus();
});
ui.closeSidebar.addEventListener("click", () => { closeSidebarOnPhone(); ui.openSidebar.focus(); });
ui.sidebar.addEventListener("keydown", (e) => { if (e.key === "Escape") closeSidebarOnPhone(); });
ui.newChat.addEventListener("click", newChat);
document.querySelector(".scrim").addEventListener("click", closeSidebarOnPhone);

function themeLabel() {
  const dark = document.documentElement.dataset.effectiveTheme === "dark";
  ui.theme.textContent = dark ? "☀ Light theme" : "☾ Dark theme";
  ui.theme.setAttribute("aria-label", dark ? "Switch to light theme" : "Switch to dark theme");
}
ui.theme.addEventListener("click", () => window.odysseusTheme.toggle());
document.addEventListener("odysseus:theme", themeLabel);

// ---- account (password mode) -----------------------------------------------------------------

/** Show who is signed in and a Sign out button; single-user mode (AUTH=none) shows neither. */
async function loadAccount() {
  try {
    const status = await api("GET", "/api/auth/status");
    const user = status.mode === "password" && status.signed_in ? status.user : null;
    ui.account.hidden = !user;
    ui.accountName.textContent = user ? user.username : "";
    controls.setAccount(status);
  } catch (err) {
    ui.account.hidden = true;
    controls.setAccount(null);
  }
}

ui.signOut.addEventListener("click", async () => {
  ui.signOut.disabled = true;
  try {
    await api("POST", "/api/auth/logout", {});
  } catch (err) {
    ui.signOut.disabled = false;
    toast(`Could not sign out: ${err.message}`);
    return;
  }
  detachTurn();
  location.assign("/login");
});

// ---- code tools notice (agent mode) -------------------------------------------------------------

/** In agent mode, say when run_python / shell are not offered, and why (from /api/health). */
function showCodeNotice() {
  const off = state.codeToolsOff;
  ui.codeNotice.textContent = off ? `Code tools are off: ${off}` : "";
  ui.codeNotice.hidden = !off || mode() !== "agent";
}
async function loadCodeTools() {
  try {
    const info = (await api("GET", "/api/health")).code_tools || {};
    const off = info.sandbox !== "disabled" && (!info.available || info.allowed === false);
    state.codeToolsOff = off ? (info.reason || "unavailable") : "";
  } catch (err) {
    state.codeToolsOff = "";
  }
  showCodeNotice();
}
for (const radio of document.querySelectorAll('input[name="mode"]')) radio.addEventListener("change", showCodeNotice);

// ---- start -------------------------------------------------------------------------------------

async function start() {
  themeLabel();
  updateComposer();
  showEmpty();
  await Promise.all([loadModels(), refreshSessions(), loadAccount(), loadCodeTools()]);
  const wanted = new URLSearchParams(location.search).get("session");
  if (wanted) await openSession(wanted);
  document.body.dataset.ready = "true";
}

// Test and debugging handle; the page never reads it itself.
window.odysseus = { state, send, openSession, newChat, documents, controls };
start();
