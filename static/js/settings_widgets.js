// Small form builders the settings screen's modules share (settings.js, settings_providers.js).

import { el } from "./dom.js";

/** A label around a control (the text first, or after it for checkboxes with inline). */
export function field(label, control, inline = false) {
  const wrap = el("label", inline ? "inline" : null);
  if (inline) wrap.append(control, document.createTextNode(label));
  else wrap.append(document.createTextNode(label), control);
  return wrap;
}

/** An input of a type, with its name and value. */
export function input(type, name, value = "") {
  const node = el("input");
  node.type = type;
  node.name = name;
  node.value = value;
  return node;
}

/** A select of [value, label] options. */
export function select(name, options, value) {
  const node = el("select");
  node.name = name;
  for (const [v, label] of options) node.appendChild(new Option(label, v));
  node.value = value ?? "";
  return node;
}

/** Show an outcome ("ok" / "error" / "") in a result node. */
export function result(kind, text, node) {
  node.dataset.kind = kind;
  node.textContent = text;
}

/** A titled section of the settings screen. */
export function section(title, id) {
  const box = el("section");
  box.id = id;
  box.appendChild(el("h3", null, title));
  return box;
}
