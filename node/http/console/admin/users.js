// Users: name and tags (GET /api/users), create with a password and tags,
// change a user's tags (PUT /api/users/U with tags only: the password stays),
// delete; and each user's max-connections limit (GET /api/user-limits, the
// only user limit Warren has). Tags are RabbitMQ's: administrator,
// monitoring, policymaker, management, or any other word (which grants no
// management access).

import { actionForm, deleteButton, errorLine, fill } from "../forms.js";
import { enc, h, table } from "../ui.js";

const TAG_HELP = "comma-separated: administrator, monitoring, policymaker, management";

export async function render(el, ctx) {
  const users = await ctx.api.get("/api/users");
  const limits = Object.fromEntries((await ctx.api.get("/api/user-limits")).map((l) => [l.user, l.value]));
  const error = errorLine("users-error");
  const refresh = () => render(el, ctx);

  const columns = [
    ["Name", (u) => h("span", { "data-test": "user-name" }, u.name)],
    ["Tags", (u) => (ctx.canChange ? tagsForm(u) : h("span", { "data-test": "user-tags" }, u.tags.join(", ")))],
    ["Password", (u) => (u.password_hash ? "set" : "none (cannot log in with a password)")],
    ["Max connections", (u) => h("span", { "data-test": "user-max-connections" },
                                 String(limits[u.name]?.["max-connections"] ?? "—"))],
  ];
  if (ctx.canChange) {
    columns.push(["", (u) => deleteButton({
      label: "Delete", test: "user-delete", question: `Delete user ${u.name}?`,
      act: async () => {
        await ctx.api.del(`/api/users/${enc(u.name)}`);
        ctx.toast(`User ${u.name} deleted`, "ok");
        await refresh();
      },
      onError: (e) => error.show(e),
    })]);
  }

  function tagsForm(u) {
    return actionForm({
      test: "user-tags", submit: "Set tags", keep: true, inline: true,
      fields: [{ name: "tags", label: `Tags of ${u.name}`, value: u.tags.join(", ") }],
      onSubmit: async (v) => {
        await ctx.api.put(`/api/users/${enc(u.name)}`, { tags: v.tags });
        ctx.toast(`Tags of ${u.name} set`, "ok");
        await refresh();
      },
    });
  }

  const create = ctx.canChange ? actionForm({
    test: "user-create", legend: "Add a user", submit: "Add user",
    fields: [
      { name: "name", label: "Username", required: true },
      { name: "password", label: "Password", type: "password" },
      { name: "tags", label: "Tags", help: TAG_HELP },
    ],
    onSubmit: async (v) => {
      // without a password the user exists but cannot log in with one (OAuth 2 only)
      const body = { tags: v.tags };
      if (v.password) body.password = v.password;
      await ctx.api.put(`/api/users/${enc(v.name)}`, body);
      ctx.toast(`User ${v.name} added`, "ok");
      await refresh();
    },
  }) : null;

  const limit = ctx.canChange ? actionForm({
    test: "user-limit", legend: "Set a user's connection limit", submit: "Set limit",
    fields: [
      { name: "user", label: "User", type: "select", options: users.map((u) => u.name) },
      { name: "value", label: "Max connections", type: "number",
        help: "empty clears the limit; a negative number means none" },
    ],
    onSubmit: async (v) => {
      const path = `/api/user-limits/${enc(v.user)}/max-connections`;
      if (v.value !== null) await ctx.api.put(path, { value: v.value });
      else if (limits[v.user]?.["max-connections"] !== undefined) await ctx.api.del(path);
      ctx.toast(`Connection limit of ${v.user} ${v.value === null ? "cleared" : "set"}`, "ok");
      await refresh();
    },
  }) : null;

  fill(el, error, table(columns, users, { test: "users-table", rowTest: (u) => `user-${u.name}` }), create, limit);
}
