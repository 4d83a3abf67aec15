// Branches of a conversation: Regenerate / Retry a reply, Edit and resend a message, and the
// `< 2/3 >` control that pages through a message's alternatives.
//
// The server keeps the tree (see docs/protocol.md, "Branches"): a reply's alternatives are the
// other replies to the same user message, a message's alternatives its edited versions. The page
// never rebuilds the tree itself: it starts the run (`regenerate_of` / `edit_of` on
// /api/chat_stream), and after it ends, or after a PUT /api/sessions/{id}/branch, it shows the
// session again, so what is on screen is exactly the selected branch the model is sent.

import { api } from "./api.js";
import { button, el } from "./dom.js";

/** Remove `node` and every message after it (the part of the branch a regenerate/resend replaces). */
export function cutFrom(node) {
  let current = node;
  while (current) {
    const next = current.nextElementSibling;
    if (current.classList.contains("msg")) current.remove();
    current = next;
  }
}

/** The Regenerate button of a saved reply; reads "Retry" once the reply failed or was stopped. */
export function regenerateButton(view) {
  const regen = button("Regenerate", "regenerate", () => view.ctx.onRegenerate(view));
  regen.title = "Answer the same message again (this reply stays as an alternative)";
  view.regenButton = regen;
  labelRegenerate(view);
  return regen;
}

/** Call when a reply's outcome changes. */
export function labelRegenerate(view) {
  if (!view.regenButton) return;
  const failed = ["failed", "stopped"].includes(view.el.dataset.outcome);
  view.regenButton.textContent = failed ? "Retry" : "Regenerate";
  view.regenButton.dataset.kind = failed ? "retry" : "regenerate";
}

/**
 * Add the `< i/n >` pager to a message view when it has alternatives.
 * `branch` is the messages page's {index, count, ids}; `onSelect(id)` shows that alternative.
 */
export function addBranchPager(view, branch, onSelect) {
  if (!branch || branch.count < 2) return;
  const box = el("span", "branch-pager");
  box.setAttribute("role", "group");
  box.setAttribute("aria-label", "Alternatives");
  const index = branch.index - 1;
  const prev = button("‹", "branch-prev ghost", () => onSelect(branch.ids[index - 1]), "Previous alternative");
  const next = button("›", "branch-next ghost", () => onSelect(branch.ids[index + 1]), "Next alternative");
  prev.disabled = index <= 0;
  next.disabled = index >= branch.count - 1;
  const where = el("span", "branch-index", `${branch.index}/${branch.count}`);
  box.append(prev, where, next);
  view.el.dataset.branchIndex = String(branch.index);
  view.el.dataset.branchCount = String(branch.count);
  view.actions.before(box); // always visible, unlike the hover actions
}

/** Store the choice of alternative `messageId` for the session (what reloads and the model see). */
export async function selectBranch(sessionId, messageId) {
  return api("PUT", `/api/sessions/${encodeURIComponent(sessionId)}/branch`, { message_id: messageId });
}
