// Permissions: each user's configure, write and read patterns per virtual
// host (GET /api/permissions); set them (PUT /api/permissions/V/U) or clear
// them (DELETE). Listing needs the administrator tag, as in RabbitMQ.

import { actionForm, deleteButton, errorLine, fill } from "../forms.js";
import { enc, h, table } from "../ui.js";

export async function render(el, ctx) {
  const permissions = await ctx.api.get("/api/permissions");
  const error = errorLine("permissions-error");
  const refresh = () => render(el, ctx);

  const columns = [
    ["User", (p) => p.user],
    ["Virtual host", (p) => p.vhost],
    ["Configure", (p) => h("code", { "data-test": "permission-configure" }, p.configure)],
    ["Write", (p) => h("code", { "data-test": "permission-write" }, p.write)],
    ["Read", (p) => h("code", { "data-test": "permission-read" }, p.read)],
  ];
  if (ctx.canChange) {
    columns.push(["", (p) => deleteButton({
      label: "Clear", test: "permission-delete", question: `Clear the permissions of ${p.user} in ${p.vhost}?`,
      act: async () => {
        await ctx.api.del(`/api/permissions/${enc(p.vhost)}/${enc(p.user)}`);
        ctx.toast(`Permissions of ${p.user} in ${p.vhost} cleared`, "ok");
        await refresh();
      },
      onError: (e) => error.show(e),
    })]);
  }

  let create = null;
  if (ctx.canChange) {
    const [users, vhosts] = await Promise.all([ctx.api.get("/api/users"), ctx.api.get("/api/vhosts")]);
    create = actionForm({
      test: "permission-set", legend: "Set permissions", submit: "Set permissions",
      fields: [
        { name: "user", label: "User", type: "select", options: users.map((u) => u.name) },
        { name: "vhost", label: "Virtual host", type: "select", options: vhosts.map((v) => v.name) },
        { name: "configure", label: "Configure regexp", value: ".*" },
        { name: "write", label: "Write regexp", value: ".*" },
        { name: "read", label: "Read regexp", value: ".*" },
      ],
      onSubmit: async (v) => {
        await ctx.api.put(`/api/permissions/${enc(v.vhost)}/${enc(v.user)}`,
                          { configure: v.configure, write: v.write, read: v.read });
        ctx.toast(`Permissions of ${v.user} in ${v.vhost} set`, "ok");
        await refresh();
      },
    });
  }

  const rows = table(columns, permissions, { test: "permissions-table", rowTest: (p) => `permission-${p.user}-${p.vhost}` });
  fill(el, error, rows, create);
}
