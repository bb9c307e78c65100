// Users: name and tags (GET /api/users), create with a password and tags,
// change a user's tags (PUT /api/users/U with tags only: the password stays),
// delete. Tags are RabbitMQ's: administrator, monitoring, policymaker,
// management, or any other word (which grants no management access).

import { dangerButton, errorLine, fill, form, h, seg, table } from "../forms.js";

const TAG_HELP = "comma-separated: administrator, monitoring, policymaker, management";

export async function render(el, ctx) {
  const users = await ctx.api.get("/api/users");
  const error = errorLine("users-error");
  const refresh = () => render(el, ctx);

  const columns = [
    ["Name", (u) => h("span", { test: "user-name" }, u.name)],
    ["Tags", (u) => (ctx.canChange ? tagsForm(u) : h("span", { test: "user-tags" }, u.tags.join(", ")))],
    ["Password", (u) => (u.password_hash ? "set" : "none (cannot log in with a password)")],
  ];
  if (ctx.canChange) {
    columns.push(["", (u) => dangerButton({
      label: "Delete", test: "user-delete",
      act: async () => {
        await ctx.api.del(`/api/users/${seg(u.name)}`);
        ctx.toast(`User ${u.name} deleted`, "ok");
        await refresh();
      },
      onError: (e) => error.show(e),
    })]);
  }

  function tagsForm(u) {
    return form({
      test: "user-tags", submit: "Set tags", keep: true, inline: true,
      fields: [{ name: "tags", label: `Tags of ${u.name}`, value: u.tags.join(", ") }],
      onSubmit: async (v) => {
        await ctx.api.put(`/api/users/${seg(u.name)}`, { tags: v.tags });
        ctx.toast(`Tags of ${u.name} set`, "ok");
        await refresh();
      },
    });
  }

  const create = ctx.canChange ? form({
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
      await ctx.api.put(`/api/users/${seg(v.name)}`, body);
      ctx.toast(`User ${v.name} added`, "ok");
      await refresh();
    },
  }) : null;

  fill(el, error, table({ test: "users-table", columns, rows: users, rowTest: (u) => `user-${u.name}` }),
                     create);
}
