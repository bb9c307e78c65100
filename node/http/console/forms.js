// DOM helpers the exchange and admin pages are built from: an element
// builder, forms whose failures show the API's reason next to them, tables
// with header cells, a two-step button for destructive actions, and the
// user-tag checks that decide which forms a user is shown. The API checks
// every action anyway; hiding a form only spares a user a refusal.

// h("p", {class: "x", test: "y", onclick: fn}, "text", child, [more]):
// `test` becomes data-test (what the browser tests click and read), on* a
// listener, true an empty attribute; false, null and undefined are left out.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "test") el.dataset.test = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

// Replaces el's children, leaving out null, undefined and false (a form a
// user may not use), which replaceChildren would write out as text.
export function fill(el, ...children) {
  el.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
  return el;
}

// What to show for a failure: the API's own reason (ApiError.reason) when it
// answered, else the error's message (a JSON field that did not parse).
export function errorText(error) {
  if (error && typeof error.reason === "string" && error.reason) return error.reason;
  return String((error && error.message) || error);
}

// An alert paragraph, hidden until show(error) fills it.
export function errorLine(test) {
  const el = h("p", { class: "error", role: "alert", test, hidden: true });
  el.show = (error) => {
    el.textContent = errorText(error);
    el.hidden = false;
  };
  el.clear = () => {
    el.textContent = "";
    el.hidden = true;
  };
  return el;
}

let fieldIds = 0;

// One labelled control. spec: {name, label, type: text | password | number |
// select | checkbox | textarea, value, options: [value | [value, label]],
// required, placeholder, help}.
function control(spec, formTest) {
  const id = `f${++fieldIds}-${spec.name}`;
  const common = { id, name: spec.name, test: `${formTest}-${spec.name}`, required: spec.required };
  let input;
  if (spec.type === "select") {
    input = h("select", common, spec.options.map((option) => {
      const [value, label] = Array.isArray(option) ? option : [option, option];
      return h("option", { value, selected: value === spec.value }, label);
    }));
  } else if (spec.type === "textarea") {
    input = h("textarea", { ...common, rows: spec.rows || 3, placeholder: spec.placeholder }, spec.value || "");
  } else if (spec.type === "checkbox") {
    input = h("input", { ...common, type: "checkbox", checked: Boolean(spec.value) });
  } else {
    input = h("input", { ...common, type: spec.type || "text", value: spec.value ?? "", placeholder: spec.placeholder,
                         min: spec.min, autocomplete: spec.type === "password" ? "new-password" : "off" });
  }
  const label = h("label", { for: id }, spec.label);
  const help = spec.help ? h("small", { class: "help" }, spec.help) : null;
  return { input, row: h("div", { class: spec.type === "checkbox" ? "field check" : "field" }, label, input, help) };
}

function valueOf(input) {
  if (input.type === "checkbox") return input.checked;
  if (input.type === "number") return input.value === "" ? null : Number(input.value);
  return input.value;
}

// A real <form> with a <fieldset> and <legend>: submitting (a click or Enter)
// calls onSubmit(values) with each field's value by name; while it runs the
// button is disabled; a failure shows its reason in [data-test=<test>-error]
// and keeps what was typed; a success clears the form (unless keep).
export function form({ test, legend, fields, submit, onSubmit, keep = false, inline = false }) {
  const inputs = {};
  const rows = fields.map((spec) => {
    const { input, row } = control(spec, test);
    inputs[spec.name] = input;
    return row;
  });
  const error = errorLine(`${test}-error`);
  const button = h("button", { type: "submit", test: `${test}-submit` }, submit);
  const el = h("form", { test, class: inline ? "form inline" : "form" },
    h("fieldset", {}, legend ? h("legend", {}, legend) : null, rows, button), error);
  el.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.clear();
    button.disabled = true;
    try {
      const values = {};
      for (const [name, input] of Object.entries(inputs)) values[name] = valueOf(input);
      await onSubmit(values);
      if (!keep) el.reset();
    } catch (e) {
      error.show(e);
    } finally {
      button.disabled = false;
    }
  });
  return el;
}

// A button that asks before it acts: the first click arms it ("Really
// delete?"), the second runs act(); a failure goes to onError. No confirm()
// dialog, so the keyboard and the browser tests drive it like any button.
export function dangerButton({ label, test, act, onError }) {
  const button = h("button", { type: "button", class: "danger", test }, label);
  let armed = false;
  button.addEventListener("click", async () => {
    if (!armed) {
      armed = true;
      button.textContent = `Really ${label.toLowerCase()}?`;
      button.classList.add("armed");
      return;
    }
    button.disabled = true;
    try {
      await act();
    } catch (e) {
      onError(e);
      armed = false;
      button.textContent = label;
      button.classList.remove("armed");
    } finally {
      button.disabled = false;
    }
  });
  return button;
}

// <table> with a <th> per column; columns: [[heading, row => text | Node]];
// rowTest(row) names each <tr>'s data-test.
export function table({ test, columns, rows, rowTest, empty = "None." }) {
  const head = h("tr", {}, columns.map(([heading]) => h("th", { scope: "col" }, heading)));
  const body = rows.length
    ? rows.map((row) => h("tr", { test: rowTest ? rowTest(row) : undefined },
        columns.map(([, cell]) => h("td", {}, cell(row)))))
    : [h("tr", {}, h("td", { colspan: columns.length, class: "empty" }, empty))];
  return h("table", { test }, h("thead", {}, head), h("tbody", {}, body));
}

// A JSON field's text as an object ("" is {}); a syntax error names the field.
export function parseJson(text, field) {
  if (!text || !text.trim()) return {};
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new Error(`${field} is not valid JSON: ${e.message}`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new Error(`${field} must be a JSON object, like {"key": "value"}`);
  }
  return value;
}

// The user's tags as a list (whoami answers a list; a comma string is read too).
export function tagsOf(user) {
  const tags = (user && user.tags) || [];
  return Array.isArray(tags) ? tags : String(tags).split(",").map((t) => t.trim()).filter(Boolean);
}

// Whether the user's tags grant `tag`: administrator grants every tag, as in
// RabbitMQ's management plugin.
export function hasTag(user, tag) {
  const tags = tagsOf(user);
  return tags.includes("administrator") || tags.includes(tag);
}

// A vhost or resource name as one path segment.
export const seg = encodeURIComponent;
