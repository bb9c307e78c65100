// Topic permissions: per user, virtual host and topic exchange, the write and
// read patterns routing keys must match (GET /api/topic-permissions); set
// (PUT /api/topic-permissions/V/U with the exchange in the body) or clear one
// exchange's entry (DELETE /api/topic-permissions/V/U/X).

import { actionForm, deleteButton, errorLine, fill } from "../forms.js";
import { enc, h, table } from "../ui.js";

export async function render(el, ctx) {
  const entries = await ctx.api.get("/api/topic-permissions");
  const error = errorLine("topic-permissions-error");
  const refresh = () => render(el, ctx);

  const columns = [
    ["User", (p) => p.user],
    ["Virtual host", (p) => p.vhost],
    ["Exchange", (p) => p.exchange],
    ["Write", (p) => h("code", { "data-test": "topic-permission-write" }, p.write)],
    ["Read", (p) => h("code", { "data-test": "topic-permission-read" }, p.read)],
  ];
  if (ctx.canChange) {
    columns.push(["", (p) => deleteButton({
      label: "Clear", test: "topic-permission-delete", question: `Clear the topic permissions of ${p.user} on ${p.exchange} in ${p.vhost}?`,
      act: async () => {
        await ctx.api.del(`/api/topic-permissions/${enc(p.vhost)}/${enc(p.user)}/${enc(p.exchange)}`);
        ctx.toast(`Topic permissions of ${p.user} on ${p.exchange} cleared`, "ok");
        await refresh();
      },
      onError: (e) => error.show(e),
    })]);
  }

  let create = null;
  if (ctx.canChange) {
    const [users, vhosts] = await Promise.all([ctx.api.get("/api/users"), ctx.api.get("/api/vhosts")]);
    create = actionForm({
      test: "topic-permission-set", legend: "Set topic permissions", submit: "Set topic permissions",
      fields: [
        { name: "user", label: "User", type: "select", options: users.map((u) => u.name) },
        { name: "vhost", label: "Virtual host", type: "select", options: vhosts.map((v) => v.name) },
        { name: "exchange", label: "Topic exchange", value: "amq.topic", required: true },
        { name: "write", label: "Write regexp", value: ".*" },
        { name: "read", label: "Read regexp", value: ".*" },
      ],
      onSubmit: async (v) => {
        await ctx.api.put(`/api/topic-permissions/${enc(v.vhost)}/${enc(v.user)}`,
                          { exchange: v.exchange, write: v.write, read: v.read });
        ctx.toast(`Topic permissions of ${v.user} on ${v.exchange} set`, "ok");
        await refresh();
      },
    });
  }

  const rows = table(columns, entries, { test: "topic-permissions-table", rowTest: (p) => `topic-permission-${p.user}-${p.vhost}-${p.exchange}` });
  fill(el, error, rows, create);
}
