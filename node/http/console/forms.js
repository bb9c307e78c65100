// What the exchange and admin pages add to ui.js: forms described as data
// whose failures show the API's reason next to them (and stay on screen,
// unlike a toast), a delete button that asks first, JSON fields, and the
// user-tag checks that decide which forms a user is shown. The API checks
// every action anyway; hiding a form only spares a user a refusal.

import { field, h } from "./ui.js";

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
  const el = h("p", { class: "error", role: "alert", "data-test": test, hidden: true });
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

// One control of a form: spec {name, label, type: text | password | number |
// select | checkbox | textarea, value, options: [value | [value, label]],
// required, placeholder, help, min, rows}. The value given is the control's
// default too, so a form's reset() goes back to it.
function control(spec, formTest) {
  const attrs = { name: spec.name, "data-test": `${formTest}-${spec.name}`, required: spec.required };
  let input;
  if (spec.type === "select") {
    input = h("select", attrs, spec.options.map((option) => {
      const [value, label] = Array.isArray(option) ? option : [option, option];
      return h("option", { value, selected: value === spec.value }, label);
    }));
  } else if (spec.type === "textarea") {
    input = h("textarea", { ...attrs, rows: spec.rows || 3, placeholder: spec.placeholder });
    input.defaultValue = spec.value ?? "";
  } else if (spec.type === "checkbox") {
    input = h("input", { ...attrs, type: "checkbox", checked: Boolean(spec.value) });
  } else {
    input = h("input", { ...attrs, type: spec.type || "text", placeholder: spec.placeholder, min: spec.min,
                         autocomplete: spec.type === "password" ? "new-password" : "off" });
    input.defaultValue = spec.value ?? "";
  }
  const label = spec.help ? [spec.label, h("small", { class: "hint" }, ` (${spec.help})`)] : spec.label;
  return { input, row: field(label, input) };
}

function valueOf(input) {
  if (input.type === "checkbox") return input.checked;
  if (input.type === "number") return input.value === "" ? null : Number(input.value);
  return input.value;
}

// A real <form> with a <fieldset>, its <legend> and a <label> per control:
// submitting (the button or Enter) calls onSubmit(values), each field's value
// by name (a checkbox's is a boolean, an empty number null); the button is
// disabled while it runs; a failure shows its reason in
// [data-test=<test>-error] and keeps what was typed; a success resets the
// form (unless keep).
export function actionForm({ test, legend, fields, submit, onSubmit, keep = false, inline = false }) {
  const inputs = {};
  const rows = fields.map((spec) => {
    const { input, row } = control(spec, test);
    inputs[spec.name] = input;
    return row;
  });
  const error = errorLine(`${test}-error`);
  const button = h("button", { type: "submit", "data-test": `${test}-submit` }, submit);
  const el = h("form", { "data-test": test, class: inline ? "inline" : "card" },
    h("fieldset", { class: "row" }, legend ? h("legend", {}, legend) : null, rows, button), error);
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

// A button that asks (confirm(), as the rest of the console) before act();
// a failure goes to onError.
export function deleteButton({ label = "Delete", test, question, act, onError }) {
  const button = h("button", { type: "button", class: "danger", "data-test": test }, label);
  button.addEventListener("click", async () => {
    if (!confirm(question)) return;
    button.disabled = true;
    try {
      await act();
    } catch (e) {
      onError(e);
    } finally {
      button.disabled = false;
    }
  });
  return button;
}

// A JSON field's text as an object ("" is {}); a syntax error names the field.
export function parseJson(text, what) {
  if (!text || !text.trim()) return {};
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new Error(`${what} is not valid JSON: ${e.message}`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new Error(`${what} must be a JSON object, like {"key": "value"}`);
  }
  return value;
}

// The user's tags as a list (the shell keeps whoami's list).
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
