// Overview: totals, the node-wide message rates as live charts over the last
// 10 minutes, the nodes' resources and alarms, the listeners.
//
// The API reports each rate now (message_stats.<name>_details.rate, over its
// last 5 s samples); the history is kept here, in this module, so it survives
// a visit to another page and is lost only with the tab.

import { lineChart } from "../chart.js";
import { bytes, duration, h, num, table } from "../ui.js";

export const title = "Overview";

const WINDOW_MS = 10 * 60 * 1000;
const REFRESH_MS = 5000;
// [series name, message_stats field]
const RATES = [
  ["publish", "publish"],
  ["confirm", "confirm"],
  ["deliver", "deliver_get"],
  ["redeliver", "redeliver"],
  ["ack", "ack"],
  ["drop", "drop_unroutable"],
];
const history = RATES.map(([name]) => ({ name, points: [] }));

function remember(stats, now) {
  RATES.forEach(([, stat], i) => {
    const points = history[i].points;
    points.push([now, stats?.[`${stat}_details`]?.rate ?? 0]);
    while (points.length && points[0][0] < now - WINDOW_MS) points.shift();
  });
}

function totals(o) {
  const t = o.object_totals || {};
  const q = o.queue_totals || {};
  const items = [
    ["Connections", t.connections],
    ["Channels", t.channels],
    ["Exchanges", t.exchanges],
    ["Queues", t.queues],
    ["Consumers", t.consumers],
    ["Messages", q.messages],
    ["Ready", q.messages_ready],
    ["Unacked", q.messages_unacknowledged],
  ];
  return h("ul", { class: "totals", "data-test": "totals" },
    items.map(([label, v]) => h("li", { "data-total": label.toLowerCase() }, h("b", {}, num(v ?? 0)), label)),
  ); // prettier-ignore
}

function alarms(n) {
  const on = [n.mem_alarm && "memory", n.disk_free_alarm && "disk"].filter(Boolean);
  return on.length ? on.map((a) => h("span", { class: "alarm" }, a)) : h("span", { class: "ok" }, "none");
}

function nodes(list) {
  return table(
    [
      ["Name", (n) => n.name],
      ["Running", (n) => (n.running ? "yes" : "no")],
      ["Memory", (n) => `${bytes(n.mem_used)} of ${bytes(n.mem_limit)}`],
      ["Disk free", (n) => `${bytes(n.disk_free)} (limit ${bytes(n.disk_free_limit)})`],
      ["File descriptors", (n) => `${num(n.fd_used)} of ${num(n.fd_total)}`],
      ["Alarms", alarms],
      ["Uptime", (n) => duration(n.uptime)],
      ["Maintenance", (n) => (n.being_drained ? "draining" : "")],
    ],
    list,
    { test: "nodes" },
  );
}

function listeners(list) {
  return table(
    [
      ["Protocol", (l) => l.protocol],
      ["Node", (l) => l.node],
      ["Address", (l) => l.ip_address],
      ["Port", (l) => l.port],
    ],
    list,
    { test: "listeners" },
  );
}

export async function render(el, ctx) {
  const head = h("p", { class: "hint", "data-test": "cluster-name" });
  const totalsBox = h("div");
  const chart = h("div", { "data-test": "rates-chart" });
  const nodesBox = h("div");
  const listenersBox = h("div");
  el.append(
    h("h1", {}, "Overview"),
    head,
    totalsBox,
    h("section", { class: "card" }, h("h2", {}, "Message rates, last 10 minutes"), chart),
    h("h2", {}, "Nodes"),
    nodesBox,
    h("h2", {}, "Listeners"),
    listenersBox,
  );

  const canSeeNodes = ctx.user.tags.some((t) => t === "administrator" || t === "monitoring");
  async function refresh() {
    const [o, ns] = await Promise.all([
      ctx.api.get("/api/overview"),
      canSeeNodes ? ctx.api.get("/api/nodes") : Promise.resolve(null),
    ]);
    const now = Date.now();
    remember(o.message_stats, now);
    head.textContent = `Cluster ${o.cluster_name}, ${o.product_name} ${o.product_version} (RabbitMQ ${o.rabbitmq_version} API), on node ${o.node}`;
    totalsBox.replaceChildren(totals(o));
    lineChart(chart, { series: history, unit: "msg/s", windowMs: WINDOW_MS, now });
    nodesBox.replaceChildren(ns ? nodes(ns) : h("p", { class: "hint" }, "The nodes are shown to administrator and monitoring users."));
    listenersBox.replaceChildren(listeners(o.listeners || []));
  }
  await refresh();
  ctx.every(REFRESH_MS, refresh);
}
