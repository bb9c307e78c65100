// The console's shell: login, navigation, a hash router and the session's end.
//
// Routes are "#/<page>/<arg1>/<arg2>" (args URI-encoded). A page is a module
// of pages/ exporting `title` and `render(el, ctx)`; adding a page is one line
// in PAGES (and its entry in NAV, if it belongs in the top bar).

import { api, ApiError, basicAuth, bearerAuth, call, clearSession, loadSession, saveSession, whenExpired } from "./api.js";
import { field, h } from "./ui.js";

const PAGES = {
  overview: () => import("./pages/overview.js"),
  connections: () => import("./pages/connections.js"),
  connection: () => import("./pages/connection.js"),
  queues: () => import("./pages/queues.js"),
  queue: () => import("./pages/queue.js"),
  exchanges: () => import("./pages/exchanges.js"),
  exchange: () => import("./pages/exchange.js"),
  admin: () => import("./pages/admin.js"),
  cluster: () => import("./pages/cluster.js"),
  raft: () => import("./pages/raft.js"),
  audit: () => import("./pages/audit.js"),
};

// The top bar, in this order; a name without a module in PAGES is left out.
const NAV = [
  ["overview", "Overview"],
  ["connections", "Connections"],
  ["queues", "Queues and streams"],
  ["exchanges", "Exchanges"],
  ["admin", "Admin"],
  ["cluster", "Cluster"],
  ["raft", "Raft groups"],
  ["audit", "Audit"],
];

// RabbitMQ's tags that open the management UI; the API refuses other users.
const MANAGEMENT_TAGS = ["administrator", "monitoring", "policymaker", "management"];

const main = document.getElementById("main");
const top = document.getElementById("top");
let timers = []; // the current page's refreshes (ctx.every), cleared on navigation
let generation = 0; // bumped per navigation: a slow render of a page left behind draws nothing

function toast(text, kind = "info") {
  const box = h("div", { class: `toast ${kind}`, role: kind === "error" ? "alert" : "status", "data-test": "toast" }, text);
  document.getElementById("toasts").append(box);
  setTimeout(() => box.remove(), kind === "error" ? 10000 : 5000);
}

function stopTimers() {
  timers.forEach((t) => (t.stopped = true));
  timers.forEach((t) => clearTimeout(t.id));
  timers = [];
}

// ctx.every: calls fn every `ms` (first after `ms`: render draws the page
// itself), never two at once, until the user leaves the page. A failing
// refresh shows its error once and keeps trying.
function every(ms, fn) {
  const timer = { stopped: false, id: 0, failing: false };
  const tick = async () => {
    try {
      await fn();
      timer.failing = false;
    } catch (e) {
      if (!timer.failing && !timer.stopped) toast(e.reason || e.message, "error");
      timer.failing = true;
    }
    if (!timer.stopped) timer.id = setTimeout(tick, ms);
  };
  timer.id = setTimeout(tick, ms);
  timers.push(timer);
}

function decode(part) {
  try {
    return decodeURIComponent(part);
  } catch {
    return part; // a malformed escape typed into the address bar: taken as it is
  }
}

function parseHash() {
  const parts = location.hash.replace(/^#\/?/, "").split("/");
  const name = decode(parts[0]) || "overview";
  return { name, args: parts.slice(1).map(decode) };
}

// Own keys only: "#/toString" names no page.
const hasPage = (name) => Object.hasOwn(PAGES, name);

async function route() {
  const session = loadSession();
  if (!session) return showLogin();
  stopTimers();
  const mine = ++generation;
  const { name, args } = parseHash();
  drawNav(name, session.user);
  const el = h("section", { class: "page", "data-page": name });
  main.replaceChildren(el);
  if (!hasPage(name)) {
    el.append(h("h1", {}, "Not found"), h("p", {}, `There is no page "${name}".`));
    return;
  }
  try {
    const page = await PAGES[name]();
    if (mine !== generation) return;
    document.title = `${page.title} - Warren`;
    const ctx = {
      api,
      args,
      user: session.user,
      toast,
      go: (hash) => (location.hash = hash),
      every: (ms, fn) => mine === generation && every(ms, fn),
    };
    await page.render(el, ctx);
  } catch (e) {
    if (mine !== generation || !loadSession()) return;
    const missing = e instanceof ApiError && e.status === 404;
    el.append(h("p", { class: "error", role: "alert", "data-test": "page-error" }, missing ? `Not found: ${e.reason}` : e.reason || e.message));
  }
}

function drawNav(current, user) {
  top.hidden = false;
  const links = NAV.filter(([name]) => hasPage(name)).map(([name, label]) =>
    h("a", { href: `#/${name}`, "data-test": `nav-${name}`, "aria-current": current === name ? "page" : false }, label),
  );
  document.getElementById("nav").replaceChildren(...links);
  document.getElementById("who").textContent = `${user.name} (${user.tags.join(", ") || "no tags"})`;
}

// -- login -------------------------------------------------------------------

function showLogin(message) {
  stopTimers();
  generation++;
  top.hidden = true;
  document.title = "Log in - Warren";
  const status = h("p", { class: message ? "error" : "hint", role: "alert", "data-test": "login-message" }, message || "");
  const password = h("form", { class: "card", "data-test": "login-form" },
    h("h2", {}, "User and password"),
    field("Username", h("input", { name: "username", autocomplete: "username", required: true, autofocus: true, "data-test": "username" })),
    field("Password", h("input", { name: "password", type: "password", autocomplete: "current-password", "data-test": "password" })),
    h("button", { type: "submit", "data-test": "login" }, "Log in"),
  ); // prettier-ignore
  const token = h("form", { class: "card", "data-test": "token-form" },
    h("h2", {}, "OAuth 2 token"),
    field("Access token (JWT)", h("textarea", { name: "token", rows: 4, required: true, "data-test": "token" })),
    h("button", { type: "submit", "data-test": "token-login" }, "Log in with token"),
  ); // prettier-ignore
  password.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const f = new FormData(password);
    login(basicAuth(f.get("username"), f.get("password")), status);
  });
  token.addEventListener("submit", (ev) => {
    ev.preventDefault();
    login(bearerAuth(new FormData(token).get("token")), status);
  });
  main.replaceChildren(
    h("section", { class: "login", "data-page": "login" }, h("h1", {}, "Warren"), h("p", {}, "Log in with a user of the HTTP API tagged administrator, monitoring, policymaker or management."), status, h("div", { class: "login-forms" }, password, token)),
  ); // prettier-ignore
}

// Asks the API who the credentials are; only users with a management tag get in.
async function login(auth, status) {
  status.className = "hint";
  status.textContent = "Logging in...";
  try {
    const me = await call("GET", "/api/whoami", { auth });
    const tags = Array.isArray(me.tags) ? me.tags : String(me.tags || "").split(",").filter(Boolean);
    if (!tags.some((t) => MANAGEMENT_TAGS.includes(t))) throw new ApiError(401, "Not management user", "not_authorised");
    saveSession(auth, { name: me.name, tags });
    if (!location.hash || location.hash === "#/login") location.hash = "#/overview";
    else route();
  } catch (e) {
    status.className = "error";
    status.textContent =
      e.reason === "Not management user"
        ? `This user has none of the tags administrator, monitoring, policymaker or management, and cannot log in.`
        : e.status === 401
          ? "Login failed: wrong user name, password or token."
          : e.reason || e.message;
  }
}

// An OAuth 2 authorisation server may hand the token back in the URL
// fragment (#access_token=...): take it, then drop it from the address bar.
function tokenFromFragment() {
  if (!location.hash.startsWith("#access_token=")) return null;
  const token = new URLSearchParams(location.hash.slice(1)).get("access_token");
  history.replaceState(null, "", location.pathname + "#/overview");
  return token;
}

whenExpired(() => {
  clearSession();
  showLogin("Your session has expired: log in again.");
});

document.getElementById("logout").addEventListener("click", () => {
  clearSession();
  history.replaceState(null, "", location.pathname);
  showLogin();
});

// Every navigation, the first included: a token in the fragment logs in first.
function navigate() {
  const token = tokenFromFragment();
  if (!token) return route();
  clearSession();
  showLogin();
  login(bearerAuth(token), document.querySelector('[data-test="login-message"]'));
}

window.addEventListener("hashchange", navigate);
navigate();
