// Tiny DOM builders shared by the views: text always goes in through textContent.

/** A new element with an optional class and text. */
export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

/** A type=button button with a click handler (and an aria-label when the text is an icon). */
export function button(label, className, onClick, aria) {
  const node = el("button", className, label);
  node.type = "button";
  if (aria) node.setAttribute("aria-label", aria);
  node.addEventListener("click", onClick);
  return node;
}
