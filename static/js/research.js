// The page's research controls: the Research toggle (remembered across reloads) and the list of
// the user's research jobs (search, re-open the session a job saved its report to, delete).

import { api } from "./api.js";
import { button, el } from "./dom.js";

const KEY = "odysseus-research";

/** The Research toggle: `on()` says whether the next message runs as a research job. */
export function researchToggle(input) {
  input.checked = localStorage.getItem(KEY) === "on";
  input.addEventListener("change", () => localStorage.setItem(KEY, input.checked ? "on" : "off"));
  return { on: () => input.checked };
}

const STATUS = { running: "running…", done: "done", cancelled: "cancelled", error: "failed" };

function when(seconds) {
  return seconds ? new Date(seconds * 1000).toLocaleString() : "";
}

/** Open the job list in the modal. ctx: {openModal, openSession(id), toast}. */
export function openResearchList(ctx) {
  const box = el("div", "research-list");
  const search = el("input", "research-search");
  search.type = "search";
  search.placeholder = "Search your research…";
  search.setAttribute("aria-label", "Search research jobs");
  const list = el("ul", "research-jobs");
  box.append(search, list);
  let token = 0;

  async function load() {
    const mine = ++token;
    let data;
    try {
      data = await api("GET", `/api/research?q=${encodeURIComponent(search.value.trim())}`);
    } catch (err) {
      ctx.toast(`Could not load research jobs: ${err.message}`);
      return;
    }
    if (mine !== token) return;
    list.textContent = "";
    if (!data.jobs.length) list.appendChild(el("li", "empty", search.value ? "No matching research." : "No research yet."));
    for (const job of data.jobs) {
      const item = el("li");
      item.dataset.jobId = job.job_id;
      const status = `${STATUS[job.status] || job.status}${job.partial && job.status !== "running" ? " (partial)" : ""}`;
      item.append(el("span", "job-query", job.query),
                  el("span", "job-status", `${status} · ${job.total_sources} sources · ${when(job.created_at)}`),
                  button("Open", "open", () => { ctx.closeModal(); ctx.openSession(job.session_id); }),
                  button("Delete", "delete", async () => {
                    if (!confirm("Delete this research job? Its conversation stays in your history.")) return;
                    try {
                      await api("DELETE", `/api/research/${encodeURIComponent(job.job_id)}`);
                      item.remove();
                    } catch (err) {
                      ctx.toast(`Could not delete: ${err.message}`);
                    }
                  }, `Delete research: ${job.query}`));
      list.appendChild(item);
    }
  }

  let timer = null;
  search.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(load, 250); });
  ctx.openModal("Research jobs", box);
  search.focus();
  return load();
}
