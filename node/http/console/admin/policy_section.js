// What the policies and operator policies sections share: a listing with
// pattern, apply-to, priority and definition, a form that creates or replaces
// one (PUT <base>/V/NAME with {pattern, apply-to, priority, definition}), and
// delete. The API validates the definition's keys and answers RabbitMQ's
// reason when it refuses one; the form shows it.

import { actionForm, deleteButton, errorLine, fill, parseJson } from "../forms.js";
import { enc, h, table } from "../ui.js";

const APPLY_TO = ["all", "queues", "classic_queues", "quorum_queues", "streams", "exchanges"];

// kind: {base: "/api/policies", test: "policy", noun: "policy", example}
export async function renderPolicies(el, ctx, kind) {
  const policies = await ctx.api.get(kind.base);
  const error = errorLine(`${kind.test}-error`);
  const refresh = () => renderPolicies(el, ctx, kind);

  const columns = [
    ["Virtual host", (p) => p.vhost],
    ["Name", (p) => h("span", { "data-test": `${kind.test}-name` }, p.name)],
    ["Pattern", (p) => h("code", {}, p.pattern)],
    ["Apply to", (p) => p["apply-to"]],
    ["Priority", (p) => String(p.priority)],
    ["Definition", (p) => h("code", { "data-test": `${kind.test}-definition` }, JSON.stringify(p.definition))],
  ];
  if (ctx.canChange) {
    columns.push(["", (p) => deleteButton({
      label: "Delete", test: `${kind.test}-delete`, question: `Delete ${kind.noun.toLowerCase()} ${p.name} in ${p.vhost}?`,
      act: async () => {
        await ctx.api.del(`${kind.base}/${enc(p.vhost)}/${enc(p.name)}`);
        ctx.toast(`${kind.noun} ${p.name} deleted`, "ok");
        await refresh();
      },
      onError: (e) => error.show(e),
    })]);
  }

  let create = null;
  if (ctx.canChange) {
    const vhosts = await ctx.api.get("/api/vhosts");
    create = actionForm({
      test: `${kind.test}-create`, legend: `Add or update ${kind.article} ${kind.noun.toLowerCase()}`,
      submit: `Save ${kind.noun.toLowerCase()}`,
      fields: [
        { name: "vhost", label: "Virtual host", type: "select", options: vhosts.map((v) => v.name) },
        { name: "name", label: "Name", required: true },
        { name: "pattern", label: "Pattern (regexp on names)", required: true, placeholder: "^orders\\." },
        { name: "apply-to", label: "Apply to", type: "select", options: APPLY_TO, value: kind.applyTo },
        { name: "priority", label: "Priority", type: "number", value: 0, min: 0 },
        { name: "definition", label: "Definition (JSON)", type: "textarea", required: true, placeholder: kind.example },
      ],
      onSubmit: async (v) => {
        const body = { pattern: v.pattern, "apply-to": v["apply-to"], priority: v.priority ?? 0,
                       definition: parseJson(v.definition, "Definition") };
        await ctx.api.put(`${kind.base}/${enc(v.vhost)}/${enc(v.name)}`, body);
        ctx.toast(`${kind.noun} ${v.name} saved`, "ok");
        await refresh();
      },
    });
  }

  const rows = table(columns, policies, { test: `${kind.test}-table`, rowTest: (p) => `${kind.test}-${p.vhost}-${p.name}` });
  fill(el, error, rows, create);
}
