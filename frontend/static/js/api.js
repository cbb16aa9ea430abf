// REST client: JSON in and out, cookie session, CSRF header on unsafe methods, typed errors.

const UNSAFE = new Set(["POST", "PUT", "PATCH", "DELETE"]);
let csrfToken = null;

/** An error answer from the API: `status` (HTTP), `code`, `message` and field `errors` when given. */
export class ApiError extends Error {
  constructor(status, code, message, errors = []) {
    super(message || `request failed (${status})`);
    this.name = "ApiError";
    this.status = status;
    this.code = code || "http_" + status;
    this.errors = Array.isArray(errors) ? errors : [];
  }
}

async function parseError(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    // Not JSON (a proxy error page): fall back to the status text.
  }
  const err = (body && body.error) || {};
  return new ApiError(response.status, err.code, err.message || response.statusText, err.errors);
}

async function send(method, path, body) {
  const headers = { Accept: "application/json" };
  const init = { method, headers, credentials: "same-origin" };
  if (body instanceof FormData) {
    init.body = body; // multipart: the browser writes the Content-Type with its boundary
  } else if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  if (UNSAFE.has(method) && csrfToken) headers["X-CSRF-Token"] = csrfToken;
  let response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new ApiError(0, "network", "The server cannot be reached. Check the connection and try again.");
  }
  return response;
}

/**
 * Call the API with a JSON `body`, or a `FormData` one (an upload). Returns the parsed JSON body (or null
 * for 204). Throws ApiError on 4xx/5xx.
 * A 403 caused by a stale CSRF token is retried once after refreshing the token.
 */
export async function api(method, path, body) {
  method = method.toUpperCase();
  let response = await send(method, path, body);
  if (response.status === 403 && UNSAFE.has(method)) {
    const err = await parseError(response);
    if (!/csrf/i.test(err.code) || !(await refreshSession())) throw err;
    response = await send(method, path, body);
  }
  if (!response.ok) throw await parseError(response);
  if (response.status === 204) return null;
  const type = response.headers.get("Content-Type") || "";
  return type.includes("json") ? response.json() : response.text();
}

async function refreshSession() {
  try {
    return (await me()) !== null;
  } catch {
    return false;
  }
}

/** The logged-in user, or null when the session is missing/expired (401). */
export async function me() {
  const response = await send("GET", "/api/auth/me");
  if (response.status === 401) {
    csrfToken = null;
    return null;
  }
  if (!response.ok) throw await parseError(response);
  const body = await response.json();
  csrfToken = body.csrf_token;
  return body.user;
}

/** Log in; resolves with the user, rejects with ApiError (401 for wrong credentials, 429 when rate limited). */
export async function login(username, password) {
  const body = await api("POST", "/api/auth/login", { username, password });
  csrfToken = body.csrf_token;
  return body.user;
}

export async function logout() {
  try {
    await api("POST", "/api/auth/logout");
  } finally {
    csrfToken = null;
  }
}

/** A human sentence for an error, suitable for a status line. */
export function describeError(err) {
  if (err instanceof ApiError) {
    if (err.status === 401) return "Your session has ended. Please log in again.";
    if (err.status === 403) return err.message || "You are not allowed to do that.";
    if (err.status === 429) return "Too many attempts. Wait a minute and try again.";
    return err.message;
  }
  return err && err.message ? err.message : String(err);
}
