// Globals of the page for the type checker (`make lint` runs tsc --checkJs over static/js).
// The third-party libraries are classic scripts from static/vendor (see templates/index.html) that
// set window properties; their types come from the same pinned npm packages `make vendor` copies.
// highlight.js's CDN build ships no types, so it is declared by the calls the page makes.

interface HighlightJs {
  highlight(code: string, options: { language: string; ignoreIllegals?: boolean }): { value: string };
  highlightElement(element: HTMLElement): void;
  getLanguage(name: string): object | undefined;
}

interface Window {
  marked: typeof import("marked");
  DOMPurify: typeof import("dompurify").default;
  hljs?: HighlightJs;
  mermaid?: typeof import("mermaid").default;
  katex?: typeof import("katex").default;
  Diff?: typeof import("diff");
  /** theme.js: the colour scheme, followed or forced. */
  odysseusTheme: { set(pref: string): void; toggle(): void };
  /** auth.js: the sign-in helpers of the auth pages. */
  odysseusAuth: object;
  /** chat.js: the page's state and entry points, for tests and the console. */
  odysseus: object;
}
