// One queue or stream: details, counts and a live rate chart, consumers,
// bindings, replicas (a quorum queue's Raft status, with add, remove and move),
// and the actions: publish, get (requeue or ack), purge, delete.
//
// Args: [vhost, name]. Rate history is kept per queue in this module, as the
// overview keeps the node's.
import { lineChart } from "../chart.js";
import { bytes, enc, facts, field, form, h, json, num, table } from "../ui.js";

export const title = "Queue";

const WINDOW_MS = 10 * 60 * 1000;
const RATES = [
  ["publish", "publish"],
  ["deliver", "deliver_get"],
  ["redeliver", "redeliver"],
  ["ack", "ack"],
];
const histories = new Map(); // "vhost/name" -> [{name, points}]

function remember(key, stats, now) {
  if (!histories.has(key)) histories.set(key, RATES.map(([name]) => ({ name, points: [] })));
  const series = histories.get(key);
  RATES.forEach(([, stat], i) => {
    const points = series[i].points;
    points.push([now, stats?.[`${stat}_details`]?.rate ?? 0]);
    while (points.length && points[0][0] < now - WINDOW_MS) points.shift();
  });
  return series;
}

function details(q) {
  return facts([
    ["Type", q.type],
    ["State", q.state],
    ["Durable", q.durable ? "yes" : "no"],
    ["Auto-delete", q.auto_delete ? "yes" : "no"],
    ["Exclusive", q.exclusive ? "yes" : "no"],
    [q.leader !== undefined ? "Leader" : "Node", q.node],
    ["Policy", q.policy || ""],
    ["Operator policy", q.operator_policy || ""],
    ["Effective policy definition", json(q.effective_policy_definition)],
    ["Arguments", json(q.arguments)],
  ], "queue-details"); // prettier-ignore
}

function counts(q) {
  const items = [
    ["Total", q.messages, "messages"],
    ["Ready", q.messages_ready, "ready"],
    ["Unacked", q.messages_unacknowledged, "unacked"],
    ["Consumers", q.consumers, "consumers"],
  ];
  return h("ul", { class: "totals", "data-test": "queue-counts" },
    items.map(([label, v, key]) => h("li", { "data-count": key }, h("b", {}, num(v ?? 0)), label)),
    h("li", {}, h("b", {}, bytes(q.message_bytes_ready ?? 0)), "Ready bytes"),
  ); // prettier-ignore
}

function streamFacts(q) {
  if (q.type !== "stream") return null;
  return h("section", { class: "card" }, h("h2", {}, "Stream"), facts([
    ["First offset", num(q.first_offset)],
    ["Last (committed) offset", num(q.committed_offset)],
    ["Segments", num(q.segments)],
    ["Size on disk", bytes(q.log_bytes)],
    q.epoch !== undefined && ["Epoch", num(q.epoch)],
    q.members && ["Replicas", q.members.join(", ")],
  ], "stream-facts")); // prettier-ignore
}

// A quorum queue's members from /status; lag is how far each member's commit
// index trails the leader's (0: it has every entry the leader committed).
function replicaTable(status, remove) {
  const leader = status.find((m) => m["Raft State"] === "leader");
  return table(
    [
      ["Node", (m) => m["Node Name"]],
      ["Role", (m) => m["Raft State"]],
      ["Membership", (m) => m.Membership],
      ["Term", (m) => num(m.Term)],
      ["Commit index", (m) => num(m["Commit Index"])],
      ["Last applied", (m) => num(m["Last Applied"])],
      ["Last log index", (m) => num(m["Last Log Index"])],
      ["Lag", (m) => (leader ? num(Math.max(0, leader["Commit Index"] - (m["Commit Index"] ?? 0))) : "no leader")],
      ["", (m) => h("button", { type: "button", class: "secondary", "data-test": "remove-replica", onclick: () => remove(m["Node Name"]) }, "Remove")],
    ],
    status,
    { test: "replicas" },
  );
}

function messagesTable(msgs) {
  return table(
    [
      ["#", (m) => msgs.indexOf(m) + 1],
      ["Payload", (m) => h("pre", { "data-test": "message-payload" }, m.payload)],
      ["Encoding", (m) => m.payload_encoding],
      ["Bytes", (m) => num(m.payload_bytes)],
      ["Redelivered", (m) => (m.redelivered ? "yes" : "no")],
      ["Properties", (m) => json(m.properties)],
      ["Left in queue", (m) => num(m.message_count)],
    ],
    msgs,
    { test: "got-messages", empty: "The queue is empty." },
  );
}

export async function render(el, ctx) {
  const [vhost, name] = ctx.args;
  const path = `/api/queues/${enc(vhost)}/${enc(name)}`;
  const key = `${vhost}/${name}`;
  const q0 = await ctx.api.get(path);

  const detailsBox = h("div");
  const countsBox = h("div");
  const chart = h("div", { "data-test": "queue-rates" });
  const streamBox = h("div");
  const consumersBox = h("div");
  const bindingsBox = h("div");
  const replicasBox = h("div");
  const gotBox = h("div");

  // -- actions ---------------------------------------------------------------
  const publish = form({ class: "card", "data-test": "publish-form" }, [
    h("h2", {}, "Publish a message"),
    field("Payload", h("textarea", { name: "payload", rows: 3, "data-test": "publish-payload" })),
    field("Properties (JSON, e.g. {\"content_type\": \"text/plain\"})", h("input", { name: "properties", value: "{}" })),
    h("button", { type: "submit", "data-test": "publish" }, "Publish"),
  ], async (f) => {
    let properties;
    try {
      properties = JSON.parse(f.get("properties") || "{}");
    } catch {
      throw new Error("the properties are not JSON");
    }
    // the default exchange routes by the queue's name, as RabbitMQ's UI publishes to a queue
    const r = await ctx.api.post(`/api/exchanges/${enc(vhost)}/amq.default/publish`, { routing_key: name, payload: f.get("payload"), payload_encoding: "string", properties });
    ctx.toast(r.routed ? "Message published" : "Message published but not routed", r.routed ? "ok" : "error");
    await refresh();
  }, ctx.toast); // prettier-ignore

  const get = form({ class: "card", "data-test": "get-form" }, [
    h("h2", {}, "Get messages"),
    h("div", { class: "row" },
      field("Ack mode", h("select", { name: "ackmode", "data-test": "get-ackmode" },
        h("option", { value: "ack_requeue_true" }, "Nack, requeue"),
        h("option", { value: "ack_requeue_false" }, "Ack, remove from the queue"),
        h("option", { value: "reject_requeue_true" }, "Reject, requeue"),
      )),
      field("Messages", h("input", { name: "count", type: "number", min: 1, value: 1, "data-test": "get-count" })),
      field("Truncate to bytes", h("input", { name: "truncate", type: "number", min: 1, value: 50000 })),
      h("button", { type: "submit", "data-test": "get" }, "Get messages"),
    ),
    gotBox,
  ], async (f) => {
    const msgs = await ctx.api.post(`${path}/get`, { count: Number(f.get("count")), ackmode: f.get("ackmode"), encoding: "auto", truncate: Number(f.get("truncate")) });
    gotBox.replaceChildren(messagesTable(msgs));
    await refresh();
  }, ctx.toast); // prettier-ignore

  const purge = h("button", { type: "button", class: "secondary", "data-test": "purge" }, "Purge messages");
  purge.addEventListener("click", async () => {
    if (!confirm(`Remove every ready message of ${name}?`)) return;
    try {
      await ctx.api.del(`${path}/contents`);
      ctx.toast(`Queue ${name} purged`, "ok");
      await refresh();
    } catch (e) {
      ctx.toast(e.reason, "error");
    }
  });
  const remove = h("button", { type: "button", class: "danger", "data-test": "delete-queue" }, "Delete queue");
  remove.addEventListener("click", async () => {
    if (!confirm(`Delete ${name} and its messages?`)) return;
    try {
      await ctx.api.del(path);
      ctx.toast(`Queue ${name} deleted`, "ok");
      ctx.go("#/queues");
    } catch (e) {
      ctx.toast(e.reason, "error");
    }
  });

  // -- replicas (quorum queues) ------------------------------------------------
  const quorumPath = `/api/queues/quorum/${enc(vhost)}/${enc(name)}`;
  async function removeReplica(node) {
    if (!confirm(`Remove the replica on ${node}?`)) return;
    try {
      await ctx.api.del(`${quorumPath}/replicas/delete`, { node });
      ctx.toast(`Replica on ${node} removed`, "ok");
      await refresh();
    } catch (e) {
      ctx.toast(e.reason, "error");
    }
  }
  const replicaForm =
    q0.type === "quorum" &&
    form({ class: "row", "data-test": "replica-form" }, [
      field("Node", h("input", { name: "node", required: true, list: "cluster-nodes", "data-test": "replica-node" })),
      field("Move from (optional: remove this one after the new one is added)", h("input", { name: "from", list: "cluster-nodes", "data-test": "replica-from" })),
      h("datalist", { id: "cluster-nodes" }),
      h("button", { type: "submit", "data-test": "add-replica" }, "Add or move replica"),
    ], async (f) => {
      const [node, from] = [f.get("node"), f.get("from")];
      await ctx.api.post(`${quorumPath}/replicas/add`, { node });
      if (from) await ctx.api.del(`${quorumPath}/replicas/delete`, { node: from });
      ctx.toast(from ? `Replica moved from ${from} to ${node}` : `Replica added on ${node}`, "ok");
      await refresh();
    }, ctx.toast); // prettier-ignore

  el.append(
    h("p", {}, h("a", { href: "#/queues" }, "Queues and streams"), ` › in virtual host "${vhost}"`),
    h("h1", { "data-test": "queue-name" }, name),
    countsBox,
    h("section", { class: "card" }, h("h2", {}, "Message rates, last 10 minutes"), chart),
    h("div", { class: "actions" }, purge, remove),
    h("div", { class: "grid2" }, h("section", { class: "card" }, h("h2", {}, "Details"), detailsBox), streamBox),
    q0.type === "quorum" ? h("section", { class: "card" }, h("h2", {}, "Replicas"), replicasBox, replicaForm) : "",
    h("section", { class: "card" }, h("h2", {}, "Consumers"), consumersBox),
    h("section", { class: "card" }, h("h2", {}, "Bindings"), bindingsBox),
    h("div", { class: "grid2" }, publish, get),
  );

  const isMonitor = ctx.user.tags.some((t) => t === "administrator" || t === "monitoring");
  if (replicaForm && isMonitor) {
    ctx.api.get("/api/nodes").then(
      (nodes) => el.querySelector("#cluster-nodes").replaceChildren(...nodes.map((n) => h("option", { value: n.name }))),
      () => {}, // only a hint for the field: typing a node name works without it
    );
  }

  async function refresh() {
    const [q, consumers, bindings, status] = await Promise.all([
      ctx.api.get(path),
      ctx.api.get(`/api/consumers/${enc(vhost)}`),
      ctx.api.get(`${path}/bindings`),
      q0.type === "quorum" ? ctx.api.get(`${quorumPath}/status`).catch((e) => e) : null,
    ]);
    const now = Date.now();
    countsBox.replaceChildren(counts(q));
    if (q.message_stats) lineChart(chart, { series: remember(key, q.message_stats, now), unit: "msg/s", windowMs: WINDOW_MS, now });
    else chart.replaceChildren(h("p", { class: "hint" }, `The API reports no message rates for a ${q.type} queue.`));
    detailsBox.replaceChildren(details(q));
    streamBox.replaceChildren(streamFacts(q) || "");
    const mine = consumers.filter((c) => c.queue.name === name);
    consumersBox.replaceChildren(table([
      ["Consumer tag", (c) => c.consumer_tag],
      ["Connection", (c) => h("a", { href: `#/connection/${enc(c.channel_details.connection_name)}` }, c.channel_details.connection_name)],
      ["Session", (c) => c.channel_details.number],
      ["Ack required", (c) => (c.ack_required ? "yes" : "no")],
      ["Credit", (c) => num(c.prefetch_count)],
      ["Status", (c) => c.activity_status],
    ], mine, { test: "consumers", empty: "No consumer." })); // prettier-ignore
    bindingsBox.replaceChildren(table([
      ["From", (b) => (b.source === "" ? "(default exchange)" : b.source)],
      ["Routing key", (b) => b.routing_key],
      ["Arguments", (b) => json(b.arguments)],
    ], bindings, { test: "bindings" })); // prettier-ignore
    if (status instanceof Error) replicasBox.replaceChildren(h("p", { class: "error" }, status.reason || status.message));
    else if (status) replicasBox.replaceChildren(replicaTable(status, removeReplica));
  }
  await refresh();
  ctx.every(5000, refresh);
}
