// Users: name and tags (GET /api/users), create with a password and tags,
// change a user's tags (PUT /api/users/U with tags only: the password stays),
// delete. Tags are RabbitMQ's: administrator, monitoring, policymaker,
// management, or any other word (which grants no management access).

import { actionForm, deleteButton, errorLine, fill } from "../forms.js";
import { enc, h, table } from "../ui.js";

const TAG_HELP = "comma-separated: administrator, monitoring, policymaker, management";

export async function render(el, ctx) {
  const users = await ctx.api.get("/api/users");
  const error = errorLine("users-error");
  const refresh = () => render(el, ctx);

  const columns = [
    ["Name", (u) => h("span", { "data-test": "user-name" }, u.name)],
    ["Tags", (u) => (ctx.canChange ? tagsForm(u) : h("span", { "data-test": "user-tags" }, u.tags.join(", ")))],
    ["Password", (u) => (u.password_hash ? "set" : "none (cannot log in with a password)")],
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

  fill(el, error, table(columns, users, { test: "users-table", rowTest: (u) => `user-${u.name}` }),
                     create);
}
