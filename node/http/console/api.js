// The console's only way to the broker: the management HTTP API, with the
// logged-in user's credentials on every call. Credentials live in
// sessionStorage (gone when the tab closes, never in a cookie, so no request
// carries them unless this module adds them).
//
// Contract (docs/architecture.md, "Web console"): api.get/put/post/del return
// the parsed JSON (null for an empty answer such as 204) and throw ApiError
// {status, reason, error}. A failed login (401 "not_authorized": a wrong
// password, a changed one, an expired token) means the session is over: the
// handler set by app.js sends the user back to the login page. A refused
// action (RabbitMQ 4 answers it 401 too, with "not_authorised") is an
// ordinary ApiError for the page to show.

const KEY = "warren.session";

export class ApiError extends Error {
  constructor(status, reason, error) {
    super(reason);
    this.status = status;
    this.reason = reason;
    this.error = error;
  }
}

let session = null; // {auth: "Basic ..."|"Bearer ...", user: {name, tags}}
let onExpired = () => {};

// app.js: what to do when the API no longer accepts the credentials.
export function whenExpired(fn) {
  onExpired = fn;
}

export function loadSession() {
  try {
    session = JSON.parse(sessionStorage.getItem(KEY));
  } catch {
    session = null;
  }
  return session;
}

export function saveSession(auth, user) {
  session = { auth, user };
  sessionStorage.setItem(KEY, JSON.stringify(session));
}

export function clearSession() {
  session = null;
  sessionStorage.removeItem(KEY);
}

export function basicAuth(name, password) {
  // btoa takes Latin-1 only: encode the UTF-8 bytes first
  const bytes = new TextEncoder().encode(`${name}:${password}`);
  return "Basic " + btoa(String.fromCharCode(...bytes));
}

export function bearerAuth(token) {
  return "Bearer " + token.trim();
}

function url(path, query) {
  const u = new URL(path, location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== "") u.searchParams.set(k, String(v));
  }
  return u;
}

// One call with explicit credentials (the login form uses it before a session exists).
export async function call(method, path, { query, body, auth } = {}) {
  const headers = { Accept: "application/json" };
  const authorization = auth || session?.auth;
  if (authorization) headers.Authorization = authorization;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let r;
  try {
    r = await fetch(url(path, query), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      // no cookies, and above all no browser login dialog: the API's 401 carries a
      // Basic challenge, which the browser answers with a prompt unless told to omit
      credentials: "omit",
    });
  } catch (e) {
    throw new ApiError(0, `the node does not answer (${e.message})`, "network");
  }
  const text = await r.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!r.ok) {
    const err = new ApiError(r.status, data?.reason || data?.error || r.statusText, data?.error);
    if (r.status === 401 && err.error === "not_authorized" && !auth && session) onExpired();
    throw err;
  }
  return data;
}

export const api = {
  get: (path, query) => call("GET", path, { query }),
  put: (path, body) => call("PUT", path, { body: body ?? {} }),
  post: (path, body) => call("POST", path, { body: body ?? {} }),
  del: (path, body) => call("DELETE", path, { body }),
};
