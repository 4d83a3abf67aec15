// Light and dark: follows the system (prefers-color-scheme) until the user picks one with the
// toggle; the choice is remembered. Loaded as a classic script in <head> to avoid a flash.
(function () {
  const KEY = "odysseus-theme";
  const media = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;

  function apply(pref) {
    const root = document.documentElement;
    if (pref === "light" || pref === "dark") root.dataset.theme = pref;
    else delete root.dataset.theme;
    const dark = pref === "dark" || (pref !== "light" && !!(media && media.matches));
    root.dataset.effectiveTheme = dark ? "dark" : "light";
    document.dispatchEvent(new CustomEvent("odysseus:theme", { detail: { dark } }));
  }

  function stored() {
    try {
      return localStorage.getItem(KEY) || "";
    } catch (err) {
      return "";
    }
  }

  window.odysseusTheme = {
    /** Set "light", "dark" or "" (follow the system) and remember it. */
    set(pref) {
      try {
        if (pref) localStorage.setItem(KEY, pref);
        else localStorage.removeItem(KEY);
      } catch (err) {
        /* private mode: the choice lasts for this page only */
      }
      apply(pref);
    },
    /** Flip between light and dark from whatever is showing now. */
    toggle() {
      this.set(document.documentElement.dataset.effectiveTheme === "dark" ? "light" : "dark");
    },
  };
  if (media && media.addEventListener) media.addEventListener("change", () => apply(stored()));
  apply(stored());
})();
