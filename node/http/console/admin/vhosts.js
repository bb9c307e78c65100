// Virtual hosts: description, tags, default queue type, message counts and the
// limits max-connections and max-queues (GET /api/vhost-limits); create one
// with all of these, set or clear a limit, delete one.

import { actionForm, deleteButton, errorLine, fill } from "../forms.js";
import { enc, h, table } from "../ui.js";

const QUEUE_TYPES = ["classic", "quorum", "stream"];
const LIMITS = ["max-connections", "max-queues"];

export async function render(el, ctx) {
  const vhosts = await ctx.api.get("/api/vhosts");
  // limits are administrator-only in the API: others see the vhosts without them
  const limits = ctx.canChange ? await ctx.api.get("/api/vhost-limits") : [];
  const limitsOf = Object.fromEntries(limits.map((l) => [l.vhost, l.value]));
  const error = errorLine("vhosts-error");
  const refresh = () => render(el, ctx);

  const columns = [
    ["Name", (v) => h("span", { "data-test": "vhost-name" }, v.name)],
    ["Description", (v) => v.description || ""],
    ["Tags", (v) => h("span", { "data-test": "vhost-tags" }, (v.tags || []).join(", "))],
    ["Default queue type", (v) => h("span", { "data-test": "vhost-default-queue-type" }, v.default_queue_type)],
    ["Messages", (v) => String(v.messages ?? 0)],
  ];
  if (ctx.canChange) {
    for (const limit of LIMITS) {
      columns.push([limit, (v) => h("span", { "data-test": `vhost-${limit}` }, String(limitsOf[v.name]?.[limit] ?? "—"))]);
    }
    columns.push(["", (v) => deleteButton({
      label: "Delete", test: "vhost-delete", question: `Delete virtual host ${v.name} and everything in it?`,
      act: async () => {
        await ctx.api.del(`/api/vhosts/${enc(v.name)}`);
        ctx.toast(`Virtual host ${v.name} deleted`, "ok");
        await refresh();
      },
      onError: (e) => error.show(e),
    })]);
  }

  async function setLimit(vhost, limit, value) {
    const path = `/api/vhost-limits/${enc(vhost)}/${limit}`;
    if (value === null) {
      if (limitsOf[vhost]?.[limit] !== undefined) await ctx.api.del(path);
    } else {
      await ctx.api.put(path, { value });
    }
  }

  const forms = !ctx.canChange ? [] : [
    actionForm({
      test: "vhost-create", legend: "Add a virtual host", submit: "Add virtual host",
      fields: [
        { name: "name", label: "Name", required: true },
        { name: "description", label: "Description" },
        { name: "tags", label: "Tags", help: "comma-separated" },
        { name: "default_queue_type", label: "Default queue type", type: "select", options: QUEUE_TYPES },
        { name: "max-connections", label: "Max connections", type: "number", help: "empty: no limit" },
        { name: "max-queues", label: "Max queues", type: "number", help: "empty: no limit" },
      ],
      onSubmit: async (v) => {
        await ctx.api.put(`/api/vhosts/${enc(v.name)}`, { description: v.description, tags: v.tags,
                                                           default_queue_type: v.default_queue_type });
        for (const limit of LIMITS) {
          if (v[limit] !== null) await setLimit(v.name, limit, v[limit]);
        }
        ctx.toast(`Virtual host ${v.name} added`, "ok");
        await refresh();
      },
    }),
    actionForm({
      test: "vhost-limit", legend: "Set a limit", submit: "Set limit",
      fields: [
        { name: "vhost", label: "Virtual host", type: "select", options: vhosts.map((v) => v.name) },
        { name: "limit", label: "Limit", type: "select", options: LIMITS },
        { name: "value", label: "Value", type: "number", help: "empty clears the limit; a negative number means none" },
      ],
      onSubmit: async (v) => {
        await setLimit(v.vhost, v.limit, v.value);
        ctx.toast(`Limit ${v.limit} of ${v.vhost} ${v.value === null ? "cleared" : "set"}`, "ok");
        await refresh();
      },
    }),
  ];

  fill(el, error, table(columns, vhosts, { test: "vhosts-table", rowTest: (v) => `vhost-${v.name}` }), ...forms);
}
