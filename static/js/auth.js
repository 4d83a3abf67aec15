// Sign-in, sign-up and first-run set-up forms. Also exposes window.odysseusAuth for other pages:
//   await odysseusAuth.status()        -> GET /api/auth/status (mode, user, csrf_token, ...)
//   odysseusAuth.headers()             -> {"X-Odysseus-CSRF": token} once status() has run
//   await odysseusAuth.logout()        -> POST /api/auth/logout, then go to /login
(function () {
  "use strict";
  var csrf = null;
  var header = "X-Odysseus-CSRF";

  function headers(extra) {
    var h = Object.assign({ "Content-Type": "application/json" }, extra || {});
    if (csrf) h[header] = csrf;
    return h;
  }

  function status() {
    return fetch("/api/auth/status", { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(function (s) { csrf = s.csrf_token; header = s.csrf_header || header; return s; });
  }

  function post(url, payload) {
    return fetch(url, {
      method: "POST", credentials: "same-origin", headers: headers(), body: JSON.stringify(payload || {}),
    }).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (data) {
        if (data && data.csrf_token) csrf = data.csrf_token;
        return { ok: r.ok, status: r.status, data: data };
      });
    });
  }

  function logout() {
    return post("/api/auth/logout", {}).then(function () { window.location.assign("/login"); });
  }

  window.odysseusAuth = { status: status, headers: headers, post: post, logout: logout };

  var form = /** @type {HTMLFormElement | null} */ (document.getElementById("auth-form"));
  if (!form) return;
  var error = document.getElementById("auth-error");
  var button = /** @type {HTMLButtonElement} */ (document.getElementById("auth-submit"));
  var toggle = document.getElementById("auth-switch");
  if (toggle) {
    toggle.addEventListener("click", function (ev) {
      ev.preventDefault();
      var action = form.dataset.action;
      form.dataset.action = form.dataset.altAction;
      form.dataset.altAction = action;
      var title = document.getElementById("auth-title");
      var swap = [title.textContent, button.textContent];
      title.textContent = toggle.dataset.altTitle;
      button.textContent = toggle.dataset.altButton;
      toggle.dataset.altTitle = swap[0];
      toggle.dataset.altButton = swap[1];
    });
  }
  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    error.textContent = "";
    var fields = /** @type {Record<string, HTMLInputElement>} */ (/** @type {unknown} */ (form.elements));
    var username = fields.username.value.trim();
    var password = fields.password.value;
    if (form.dataset.confirm && password !== fields.password2.value) {
      error.textContent = "The two passwords differ.";
      return;
    }
    button.disabled = true;
    post(form.dataset.action, { username: username, password: password }).then(function (res) {
      if (res.ok) {
        var next = form.dataset.next || "/";
        window.location.assign(next.charAt(0) === "/" && next.charAt(1) !== "/" ? next : "/");
        return;
      }
      error.textContent = (res.data && res.data.error) || ("Failed (" + res.status + ")");
    }).catch(function () {
      error.textContent = "The server could not be reached.";
    }).finally(function () { button.disabled = false; });
  });
})();
