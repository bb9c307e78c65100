// Topic permissions: per user, virtual host and topic exchange, the write and
// read patterns routing keys must match (GET /api/topic-permissions); set
// (PUT /api/topic-permissions/V/U with the exchange in the body) or clear one
// exchange's entry (DELETE /api/topic-permissions/V/U/X).

import { dangerButton, errorLine, fill, form, h, seg, table } from "../forms.js";

export async function render(el, ctx) {
  const entries = await ctx.api.get("/api/topic-permissions");
  const error = errorLine("topic-permissions-error");
  const refresh = () => render(el, ctx);

  const columns = [
    ["User", (p) => p.user],
    ["Virtual host", (p) => p.vhost],
    ["Exchange", (p) => p.exchange],
    ["Write", (p) => h("code", { test: "topic-permission-write" }, p.write)],
    ["Read", (p) => h("code", { test: "topic-permission-read" }, p.read)],
  ];
  if (ctx.canChange) {
    columns.push(["", (p) => dangerButton({
      label: "Clear", test: "topic-permission-delete",
      act: async () => {
        await ctx.api.del(`/api/topic-permissions/${seg(p.vhost)}/${seg(p.user)}/${seg(p.exchange)}`);
        ctx.toast(`Topic permissions of ${p.user} on ${p.exchange} cleared`, "ok");
        await refresh();
      },
      onError: (e) => error.show(e),
    })]);
  }

  let create = null;
  if (ctx.canChange) {
    const [users, vhosts] = await Promise.all([ctx.api.get("/api/users"), ctx.api.get("/api/vhosts")]);
    create = form({
      test: "topic-permission-set", legend: "Set topic permissions", submit: "Set topic permissions",
      fields: [
        { name: "user", label: "User", type: "select", options: users.map((u) => u.name) },
        { name: "vhost", label: "Virtual host", type: "select", options: vhosts.map((v) => v.name) },
        { name: "exchange", label: "Topic exchange", value: "amq.topic", required: true },
        { name: "write", label: "Write regexp", value: ".*" },
        { name: "read", label: "Read regexp", value: ".*" },
      ],
      onSubmit: async (v) => {
        await ctx.api.put(`/api/topic-permissions/${seg(v.vhost)}/${seg(v.user)}`,
                          { exchange: v.exchange, write: v.write, read: v.read });
        ctx.toast(`Topic permissions of ${v.user} on ${v.exchange} set`, "ok");
        await refresh();
      },
    });
  }

  fill(el, error, table({ test: "topic-permissions-table", columns, rows: entries,
                                    rowTest: (p) => `topic-permission-${p.user}-${p.vhost}-${p.exchange}` }), create);
}
