// The sidebar's date groups: Today, Yesterday, Previous 7 days, then one group per month ("March 2026"),
// by a chat's last activity (`updated_at`, seconds), in the browser's own time zone. Pure: no DOM.

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * The group of a time, relative to `now`.
 * @param {number} updatedAt seconds since the epoch
 * @param {Date} now
 * @returns {{key: string, label: string}}
 */
export function dateGroup(updatedAt, now) {
  const when = new Date(updatedAt * 1000);
  const today = new Date(now.getFullYear(), now.getMonth(), now.getDate()).getTime();
  const at = when.getTime();
  if (at >= today) return { key: "today", label: "Today" };
  // a calendar day earlier, whatever a daylight-saving change did to the day's length
  const yesterday = new Date(now.getFullYear(), now.getMonth(), now.getDate() - 1).getTime();
  if (at >= yesterday) return { key: "yesterday", label: "Yesterday" };
  if (at >= today - 7 * DAY_MS) return { key: "week", label: "Previous 7 days" };
  const month = `${when.getFullYear()}-${String(when.getMonth() + 1).padStart(2, "0")}`;
  const label = when.toLocaleDateString(undefined, { month: "long", year: "numeric" });
  return { key: month, label };
}

/**
 * Sessions (newest first, as listed) in consecutive date groups, in the same order.
 * @template {{updated_at: number}} T
 * @param {T[]} sessions
 * @param {Date} [now]
 * @returns {{key: string, label: string, sessions: T[]}[]}
 */
export function groupByDate(sessions, now = new Date()) {
  /** @type {{key: string, label: string, sessions: T[]}[]} */
  const groups = [];
  for (const session of sessions) {
    const { key, label } = dateGroup(Number(session.updated_at) || 0, now);
    const last = groups.at(-1);
    if (last && last.key === key) last.sessions.push(session);
    else groups.push({ key, label, sessions: [session] });
  }
  return groups;
}
