// Every request the page makes goes through here: one place for credentials, the CSRF header on
// unsafe methods, JSON errors, and the redirect to /login when the server answers 401.

const UNSAFE = new Set(["POST", "PUT", "PATCH", "DELETE"]);
export const CSRF_HEADER = "X-Odysseus-CSRF";

/** An HTTP error with the server's JSON `error` message and status. */
export class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

/** The CSRF token the server rendered into the page (empty in single-user mode). */
export function csrfToken() {
  const meta = /** @type {HTMLMetaElement | null} */ (document.querySelector('meta[name="csrf-token"]'));
  return (meta && meta.content) || "";
}

/** Send the browser to the sign-in page, coming back here afterwards. */
export function redirectToLogin() {
  const next = location.pathname + location.search;
  location.assign("/login?next=" + encodeURIComponent(next));
}

/**
 * fetch() with the app's rules. `json` becomes the body; unsafe methods carry the CSRF header;
 * a 401 redirects to /login and rejects. Returns the Response (streams are read by the caller).
 * @param {string} method
 * @param {string} url
 * @param {{json?: any, headers?: Record<string, string>, signal?: AbortSignal}} [options]
 * @returns {Promise<Response>}
 */
export async function request(method, url, { json, headers = {}, signal } = {}) {
  /** @type {RequestInit & {headers: Record<string, string>}} */
  const init = { method, credentials: "same-origin", headers: { ...headers }, signal };
  if (json !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(json);
  }
  if (UNSAFE.has(method)) {
    const token = csrfToken();
    if (token) init.headers[CSRF_HEADER] = token;
  }
  const response = await fetch(url, init);
  if (response.status === 401) {
    redirectToLogin();
    throw new ApiError("sign-in required", 401);
  }
  return response;
}

/** The error message of a failed JSON response. */
export async function errorOf(response) {
  try {
    const body = await response.json();
    return new ApiError(body.error || response.statusText, response.status);
  } catch (err) {
    return new ApiError(response.statusText || "request failed", response.status);
  }
}

/** A JSON request that resolves to the parsed body or rejects with ApiError. */
export async function api(method, url, json) {
  const response = await request(method, url, { json });
  if (!response.ok) throw await errorOf(response);
  return response.json();
}
