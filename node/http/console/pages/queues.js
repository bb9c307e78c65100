// Queues and streams: one page of the server's sorted, filtered list at a
// time, and a form that declares a queue.
import { listing } from "../listing.js";
import { enc, field, form, h, link, num, rate } from "../ui.js";

export const title = "Queues and streams";

function features(q) {
  return [q.durable && "D", q.auto_delete && "AD", q.exclusive && "Excl", Object.keys(q.arguments || {}).length && "Args"]
    .filter(Boolean)
    .join(" ");
}

function replicas(q) {
  if (!q.members) return "";
  const offline = q.members.length - (q.online || []).length;
  return `${q.members.length}${offline ? ` (${offline} offline)` : ""}`;
}

async function declareForm(ctx) {
  const vhosts = await ctx.api.get("/api/vhosts");
  return form(
    { class: "card row", "data-test": "declare-queue" },
    [
      field("Virtual host", h("select", { name: "vhost" }, vhosts.map((v) => h("option", { value: v.name }, v.name)))),
      field("Name", h("input", { name: "name", required: true, "data-test": "declare-name" })),
      field("Type", h("select", { name: "type", "data-test": "declare-type" }, ["classic", "quorum", "stream"].map((t) => h("option", { value: t }, t)))),
      field("Durable", h("select", { name: "durable" }, h("option", { value: "true" }, "yes"), h("option", { value: "false" }, "no"))),
      h("button", { type: "submit", "data-test": "declare" }, "Add queue"),
    ],
    async (f) => {
      const [vhost, name] = [f.get("vhost"), f.get("name")];
      await ctx.api.put(`/api/queues/${enc(vhost)}/${enc(name)}`, {
        durable: f.get("durable") === "true",
        auto_delete: false,
        arguments: { "x-queue-type": f.get("type") },
      });
      ctx.toast(`Queue ${name} declared`, "ok");
      ctx.go(`#/queue/${enc(vhost)}/${enc(name)}`);
    },
    ctx.toast,
  );
}

export async function render(el, ctx) {
  el.append(h("h1", {}, "Queues and streams"));
  await listing(el, ctx, {
    path: "/api/queues",
    test: "queues",
    columns: [
      { label: "Virtual host", sort: "vhost", cell: (q) => q.vhost },
      { label: "Name", sort: "name", cell: (q) => link(`#/queue/${enc(q.vhost)}/${enc(q.name)}`, q.name, "queue-link") },
      { label: "Type", sort: "type", cell: (q) => q.type },
      { label: "Features", cell: features },
      { label: "Policy", sort: "policy", cell: (q) => q.policy || "" },
      { label: "State", sort: "state", cell: (q) => q.state },
      { label: "Ready", sort: "messages_ready", num: true, cell: (q) => num(q.messages_ready) },
      { label: "Unacked", sort: "messages_unacknowledged", num: true, cell: (q) => num(q.messages_unacknowledged) },
      { label: "Total", sort: "messages", num: true, cell: (q) => h("span", { "data-test": "queue-messages" }, num(q.messages)) },
      { label: "Incoming", sort: "message_stats.publish_details.rate", num: true, cell: (q) => rate(q.message_stats?.publish_details?.rate) },
      { label: "Deliver", sort: "message_stats.deliver_get_details.rate", num: true, cell: (q) => rate(q.message_stats?.deliver_get_details?.rate) },
      { label: "Consumers", sort: "consumers", num: true, cell: (q) => num(q.consumers) },
      { label: "Leader", sort: "leader", cell: (q) => q.leader || "" },
      { label: "Replicas", cell: replicas },
    ],
  });
  el.append(h("h2", {}, "Add a queue"), await declareForm(ctx));
}
