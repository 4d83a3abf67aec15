// Attachments in the composer: the attach button, drag and drop, paste; one chip per file with an
// upload progress bar (XMLHttpRequest upload progress), image previews, and the chips under a sent
// message (live, replaced by the `attachments` event's records, and from history metadata).

import { csrfToken, CSRF_HEADER, redirectToLogin } from "./api.js";
import { button, el } from "./dom.js";

/** "12 KB" style sizes. */
export function sizeText(bytes) {
  if (typeof bytes !== "number") return "";
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${Math.round(bytes / 1024)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

function isImage(record) {
  return typeof record.mime === "string" && record.mime.startsWith("image/");
}

/** One chip for a stored attachment record {id, name, mime, size, width?, height?}. */
export function chipFor(record) {
  const chip = el("span", "attach-chip");
  chip.dataset.uploadId = record.id || "";
  chip.title = record.name || "";
  if (isImage(record) && record.id) {
    const img = el("img", "attach-thumb");
    img.alt = record.name || "image";
    img.loading = "lazy";
    img.src = `/api/upload/${encodeURIComponent(record.id)}/content`;
    img.addEventListener("error", () => img.remove(), { once: true }); // deleted since
    chip.appendChild(img);
  }
  chip.appendChild(el("span", "attach-name", record.name || "file"));
  const dims = record.width && record.height ? ` · ${record.width}×${record.height}` : "";
  chip.appendChild(el("span", "attach-size", sizeText(record.size) + dims));
  markUnread(chip, record);
  return chip;
}

/** A file whose text could not be extracted (a limit, a damaged PDF) says so on its chip. */
function markUnread(chip, record) {
  if (record.text_status !== "not_extracted") return;
  chip.classList.add("text-not-extracted");
  chip.appendChild(el("span", "attach-note", "text not extracted"));
  chip.title = `${record.name || "file"}: text not extracted (${record.text_note || "a limit was reached"})`;
}

/** Show `records` as chips under a user message element (replacing any it had). */
export function showChips(messageEl, records) {
  if (!messageEl) return;
  messageEl.querySelector(".attach-list")?.remove();
  if (!Array.isArray(records) || !records.length) return;
  const list = el("div", "attach-list");
  list.setAttribute("aria-label", "Attachments");
  for (const record of records) list.appendChild(chipFor(record));
  messageEl.querySelector(".msg-body")?.before(list);
}

/** Upload one file with progress; resolves to the server's record, rejects with a readable Error. */
function uploadFile(file, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", "/api/upload");
    xhr.withCredentials = true;
    const token = csrfToken();
    if (token) xhr.setRequestHeader(CSRF_HEADER, token);
    xhr.upload.addEventListener("progress", (e) => { if (e.lengthComputable) onProgress(e.loaded / e.total); });
    xhr.addEventListener("load", () => {
      let body = null;
      try { body = JSON.parse(xhr.responseText); } catch (err) { /* not JSON */ }
      if (xhr.status === 401) redirectToLogin();
      if (xhr.status >= 200 && xhr.status < 300 && body && body.files && body.files[0]) resolve(body.files[0]);
      else reject(new Error((body && body.error) || `upload failed (${xhr.status})`));
    });
    xhr.addEventListener("error", () => reject(new Error("upload failed: network error")));
    xhr.addEventListener("abort", () => reject(new Error("upload cancelled")));
    const form = new FormData();
    form.append("files", file, file.name || "pasted");
    xhr.send(form);
    file.xhr = xhr;
  });
}

/** The composer's attachment tray. Options: {tray, button, input, dropZone, pasteTarget, toast}. */
export class Attachments {
  constructor({ tray, button: attachButton, input, dropZone, pasteTarget, toast }) {
    this.tray = tray;
    this.toast = toast || (() => {});
    this.items = []; // {file, chip, record, state: uploading|ready|failed, promise}
    attachButton.addEventListener("click", () => input.click());
    input.addEventListener("change", () => {
      this.add([...input.files]);
      input.value = "";
    });
    dropZone.addEventListener("dragover", (e) => {
      if (![...(e.dataTransfer?.types || [])].includes("Files")) return;
      e.preventDefault();
      dropZone.classList.add("drop-active");
    });
    dropZone.addEventListener("dragleave", (e) => {
      if (e.target === dropZone || !dropZone.contains(e.relatedTarget)) dropZone.classList.remove("drop-active");
    });
    dropZone.addEventListener("drop", (e) => {
      dropZone.classList.remove("drop-active");
      if (!e.dataTransfer?.files?.length) return;
      e.preventDefault();
      this.add([...e.dataTransfer.files]);
    });
    pasteTarget.addEventListener("paste", (e) => {
      const files = [...(e.clipboardData?.files || [])];
      if (!files.length) return;
      e.preventDefault();
      this.add(files);
    });
  }

  /** Start uploading `files`, one chip each. */
  add(files) {
    for (const file of files) this.addOne(file);
    this.render();
  }

  addOne(file) {
    const item = { file, state: "uploading", record: null };
    const chip = el("span", "attach-chip uploading");
    chip.title = file.name;
    if (file.type && file.type.startsWith("image/")) {
      const img = el("img", "attach-thumb");
      img.alt = file.name || "image";
      img.src = URL.createObjectURL(file);
      img.addEventListener("load", () => URL.revokeObjectURL(img.src), { once: true });
      chip.appendChild(img);
    }
    chip.appendChild(el("span", "attach-name", file.name || "pasted"));
    const bar = el("progress", "attach-progress");
    bar.max = 1;
    bar.value = 0;
    bar.setAttribute("aria-label", `Uploading ${file.name}`);
    chip.appendChild(bar);
    chip.appendChild(button("✕", "attach-remove icon", () => this.remove(item), `Remove ${file.name}`));
    item.chip = chip;
    item.promise = uploadFile(file, (fraction) => { bar.value = fraction; })
      .then((record) => {
        item.record = record;
        item.state = "ready";
        chip.classList.replace("uploading", "ready");
        chip.dataset.uploadId = record.id;
        bar.value = 1;
        bar.remove();
        markUnread(chip, record);
      })
      .catch((err) => {
        if (!this.items.includes(item)) return; // removed meanwhile
        item.state = "failed";
        chip.classList.replace("uploading", "failed");
        bar.remove();
        chip.querySelector(".attach-name").after(el("span", "attach-error", err.message));
        this.toast(`${file.name}: ${err.message}`);
      });
    this.items.push(item);
  }

  remove(item) {
    this.items = this.items.filter((other) => other !== item);
    if (item.state === "uploading") item.file.xhr?.abort();
    this.render();
  }

  render() {
    this.tray.textContent = "";
    for (const item of this.items) this.tray.appendChild(item.chip);
    this.tray.hidden = this.items.length === 0;
  }

  /** True while a file is still uploading. */
  get busy() {
    return this.items.some((item) => item.state === "uploading");
  }

  /** The uploaded records to send with the next message; the tray is emptied (failed chips too). */
  take() {
    const records = this.items.filter((item) => item.state === "ready").map((item) => item.record);
    this.items = [];
    this.render();
    return records;
  }
}
