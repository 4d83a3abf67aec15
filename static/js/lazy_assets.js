// Large libraries the first load does without (KaTeX, mermaid): a classic script (and its style
// sheet) injected on first use, once. URLs go through import.meta.resolve, so the page's import map
// turns them into the fingerprinted, cached-for-good URLs (odysseus/static_assets.py).

/** @type {Map<string, Promise<void>>} */
const loading = new Map();

/** The URL of a file under static/ (e.g. "vendor/mermaid.min.js"), fingerprinted when the map knows it. */
export function assetUrl(path) {
  const plain = new URL(`../${path}`, import.meta.url).href;
  try {
    return import.meta.resolve(plain);
  } catch (err) {
    return plain;
  }
}

function inject(url, make) {
  let done = loading.get(url);
  if (!done) {
    done = new Promise((resolve, reject) => {
      const node = make(url);
      node.addEventListener("load", () => resolve());
      node.addEventListener("error", () => reject(new Error(`${url} failed to load`)));
      document.head.append(node);
    });
    // A failed load may be retried later (e.g. after the connection came back).
    done.catch(() => loading.delete(url));
    loading.set(url, done);
  }
  return done;
}

/** Load a classic script from static/ once; resolves when it has run. */
export function loadScript(path) {
  return inject(assetUrl(path), (url) => {
    const script = document.createElement("script");
    script.src = url;
    script.async = true;
    return script;
  });
}

/** Load a style sheet from static/ once; resolves when it applies. */
export function loadStyle(path) {
  return inject(assetUrl(path), (url) => {
    const link = document.createElement("link");
    link.rel = "stylesheet";
    link.href = url;
    return link;
  });
}
