// Small DOM helpers the pages share: an element builder (text is always set
// as text, never parsed as HTML, so a queue named "<img onerror=...>" stays a
// name), tables, forms and number formats.

// h("a", {href: "#/queues", "data-test": "x", onclick: fn}, "text", child, [more])
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "value") el.value = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// A <table>: columns are [label, row => cell (text or node)]; rows any values.
export function table(columns, rows, { test, empty = "None" } = {}) {
  if (!rows.length) return h("p", { class: "empty", "data-test": test }, empty);
  return h(
    "table",
    { "data-test": test },
    h("thead", {}, h("tr", {}, columns.map(([label]) => h("th", { scope: "col" }, label)))),
    h(
      "tbody",
      {},
      rows.map((row) => h("tr", {}, columns.map(([, cell]) => h("td", {}, cell(row))))),
    ),
  );
}

// A definition list of [label, value] pairs (a queue's details, a node's).
export function facts(pairs, test) {
  return h(
    "dl",
    { class: "facts", "data-test": test },
    pairs.filter(Boolean).map(([k, v]) => [h("dt", {}, k), h("dd", {}, v ?? "")]),
  );
}

// A labelled field for a form: the <label> wraps its control, so clicking the
// text focuses it and screen readers name it.
export function field(label, control) {
  return h("label", { class: "field" }, h("span", {}, label), control);
}

// A <form> whose submit (button or Enter) runs `onsubmit(formData)`; the
// button stays disabled while it runs, errors go to `toast`.
export function form(attrs, children, onsubmit, toast) {
  const el = h("form", attrs, children);
  el.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const buttons = el.querySelectorAll("button");
    buttons.forEach((b) => (b.disabled = true));
    try {
      await onsubmit(new FormData(el), ev.submitter);
    } catch (e) {
      toast(e.reason || e.message, "error");
    } finally {
      buttons.forEach((b) => (b.disabled = false));
    }
  });
  return el;
}

// A path segment of the API or of a hash route.
export const enc = encodeURIComponent;

export function link(hash, text, test) {
  return h("a", { href: hash, "data-test": test }, text);
}

export function num(n) {
  return n === undefined || n === null ? "" : Number(n).toLocaleString("en");
}

export function rate(r) {
  if (r === undefined || r === null) return "";
  return `${Number(r).toFixed(r >= 100 ? 0 : 1)}/s`;
}

export function bytes(n) {
  if (n === undefined || n === null) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = Number(n);
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(i ? 1 : 0)} ${units[i]}`;
}

export function duration(ms) {
  const s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400);
  const hh = Math.floor((s % 86400) / 3600);
  const mm = Math.floor((s % 3600) / 60);
  return d ? `${d}d ${hh}h` : hh ? `${hh}h ${mm}m` : `${mm}m ${s % 60}s`;
}

// JSON for arguments and other maps, shown compactly.
export function json(v) {
  return v && Object.keys(v).length ? JSON.stringify(v) : "";
}
