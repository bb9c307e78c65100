// Cluster: the members as this node sees them (leader of the metadata group,
// reachable from here, in maintenance), this node's maintenance mode (drain,
// revive) and the rebalance of quorum queue leaders.
//
// Data: GET /api/cluster (the metadata group), GET /api/raft/groups?type=metadata
// (members by node name), GET /api/maintenance (this node's state and the members
// it knows to be drained). Drain and revive act on the node serving this console
// (the API has no call to drain another): to drain another member, open its
// console. Every action is checked by the API (administrator).

import { facts, field, form, h, num, table } from "../ui.js";

export const title = "Cluster";

const REFRESH_MS = 5000;

function memberState(m, drained, maintenance) {
  if (m.self) return maintenance.state;
  return drained.has(m.address) ? "drained" : m.reachable ? "serving" : "unreachable";
}

function members(group, maintenance) {
  const drained = new Set(maintenance.drained_peers || []);
  return table(
    [
      ["Node", (m) => h("span", { "data-node": m.node }, m.node, m.self ? h("span", { class: "hint" }, " (this node)") : "")],
      ["Address", (m) => m.address],
      ["Metadata role", (m) => (m.leader ? "leader" : "follower")],
      ["Reachable from here", (m) => (m.reachable ? h("span", { class: "ok" }, "yes") : h("span", { class: "alarm" }, "no"))],
      ["State", (m) => h("span", { "data-test": `state-${m.node}` }, memberState(m, drained, maintenance))],
      ["Log matched", (m) => (m.match_index === null ? "" : num(m.match_index))],
      ["Lag", (m) => (m.lag === null ? "" : num(m.lag))],
    ],
    group ? group.members : [],
    { test: "members", empty: "This node runs no cluster." },
  );
}

function report(r) {
  if (!r) return h("p", { class: "hint" }, "No drain since this node started.");
  const moved = Object.entries(r.moved || {}).map(([g, to]) => `${g} -> ${to}`);
  return facts(
    [
      ["State after", r.state],
      ["Took", `${r.seconds} s`],
      ["Client connections closed", num(r.connections_closed)],
      ["Leaderships handed over", moved.length ? moved.join(", ") : "none"],
      ["Still led here", (r.still_leading || []).join(", ") || "none"],
      ["Streams moved", (r.streams_moved || []).map((s) => `${s.name} -> ${s.new_leader}`).join(", ") || "none"],
      ["Complete", r.done ? "yes" : "no: some leaderships stayed (no other member could take them)"],
    ],
    "drain-report",
  );
}

function rebalanced(rows) {
  return table(
    [
      ["Queue", (r) => r.name],
      ["Vhost", (r) => r.vhost],
      ["From", (r) => r.from],
      ["To", (r) => r.to],
      ["Moved", (r) => (r.ok ? "yes" : r.error)],
    ],
    rows,
    { test: "rebalance-result", empty: "Every quorum queue's leader is where it should be: nothing moved." },
  );
}

export async function render(el, ctx) {
  const admin = ctx.user.tags.includes("administrator");
  const summary = h("div");
  const membersBox = h("div");
  const stateBox = h("p", { "data-test": "maintenance-state" });
  const reportBox = h("div");
  const rebalanceBox = h("div");
  let maintenance = { state: "", drained_peers: [] };

  const drainForm = form({ class: "row", "data-test": "drain-form" }, [
    field("Wait at most (seconds) for the leaderships to move", h("input", { name: "timeout", type: "number", min: 1, max: 600, value: 30, required: true })),
    h("button", { type: "submit", class: "danger", "data-test": "drain" }, "Drain this node"),
  ], async (data) => {
    if (!confirm("Drain this node? Its clients are disconnected and it stops accepting new ones until revived.")) return;
    const r = await ctx.api.post("/api/maintenance/drain", { timeout: Number(data.get("timeout")) });
    ctx.toast(`Drained in ${r.seconds} s`, "info");
    await refresh();
  }, ctx.toast); // prettier-ignore
  const reviveForm = form({ "data-test": "revive-form" }, [
    h("button", { type: "submit", "data-test": "revive" }, "Revive this node"),
  ], async () => {
    await ctx.api.post("/api/maintenance/revive", {});
    ctx.toast("Serving clients again", "info");
    await refresh();
  }, ctx.toast); // prettier-ignore
  const rebalanceForm = form({ "data-test": "rebalance-form" }, [
    h("button", { type: "submit", "data-test": "rebalance" }, "Rebalance quorum queue leaders"),
  ], async () => {
    rebalanceBox.replaceChildren(rebalanced(await ctx.api.post("/api/rebalance/queues", {})));
    await refresh();
  }, ctx.toast); // prettier-ignore

  el.append(
    h("h1", {}, "Cluster"),
    summary,
    h("h2", {}, "Members"),
    membersBox,
    h("section", { class: "card" },
      h("h2", {}, "Maintenance of this node"),
      stateBox,
      admin ? h("div", { class: "actions" }, drainForm, reviveForm) : h("p", { class: "hint" }, "Administrators may drain and revive a node."),
      h("h3", {}, "Last drain"),
      reportBox,
      h("p", { class: "hint" }, "Drain and revive act on the node serving this console; open another member's console to drain it."),
    ),
    h("section", { class: "card" },
      h("h2", {}, "Quorum queue leaders"),
      h("p", { class: "hint" }, "Moves leaders so that each member leads about as many quorum queues, drained members none."),
      admin ? rebalanceForm : h("p", { class: "hint" }, "Administrators may rebalance."),
      rebalanceBox,
    ),
  ); // prettier-ignore

  async function refresh() {
    const [c, groups, m] = await Promise.all([
      ctx.api.get("/api/cluster"),
      ctx.api.get("/api/raft/groups", { type: "metadata" }),
      ctx.api.get("/api/maintenance"),
    ]);
    maintenance = m;
    const group = groups.items[0];
    summary.replaceChildren(
      facts(
        [
          ["This node", c.node_name],
          ["Metadata leader", group?.leader ?? "none known"],
          ["Term", num(c.term)],
          ["Commit index", num(c.commit_index)],
          ["Reachable members", `${c.reachable} of ${(c.members || []).length}${c.majority ? " (a majority)" : " (no majority: changes are refused)"}`],
        ],
        "cluster-summary",
      ),
    );
    membersBox.replaceChildren(members(group, m));
    stateBox.textContent = `This node is ${m.state}.`;
    drainForm.hidden = m.state !== "serving";
    reviveForm.hidden = m.state === "serving";
    reportBox.replaceChildren(report(m.last_drain));
  }
  await refresh();
  ctx.every(REFRESH_MS, refresh);
}
