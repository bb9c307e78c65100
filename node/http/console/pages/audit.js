// Audit: this node's cluster-state snapshots as a timeline (GET /api/audit/timeline),
// what `warren audit report` draws for every node at once, live and for one node:
// whom it reached (a partition is a red band), who led each Raft group and in
// which term, its version and restarts, feature flags enabled and alarms.
// Hand-drawn SVG, one lane per row; every span has a <title> for its details,
// and the leader changes and restarts are tables below it too.
//
// Route: #/audit[/<minutes>]

import { h, num } from "../ui.js";

export const title = "Audit";

const NS = "http://www.w3.org/2000/svg";
const W = 1100;
const LABEL = 190; // the lanes' names, left of the time axis
const LANE = 22;
const GAP = 6;
const AXIS = 24;
const REFRESH_MS = 10000;
const WINDOWS = [[15, "15 minutes"], [60, "1 hour"], [360, "6 hours"], [1440, "1 day"], [10080, "7 days"]];
const COLORS = ["#4e79a7", "#f28e2b", "#b07aa1", "#9c755f", "#76b7b2", "#edc948", "#ff9da7", "#bab0ac"];
const STATE = { self: "#8aa9c9", reachable: "#59a14f", unreachable: "#d62728" };
const STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400].map((s) => s * 1000);

function svg(tag, attrs, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children) if (c !== undefined && c !== null) el.append(c);
  return el;
}

const tip = (text) => svg("title", {}, text);
const clock = (ms, withDate) =>
  new Date(ms).toLocaleString("en-GB", { hour12: false, ...(withDate ? { month: "2-digit", day: "2-digit" } : {}), hour: "2-digit", minute: "2-digit", second: "2-digit" });

// Draws the timeline `t` into a new <svg>.
function draw(t) {
  // the axis starts at the first record in the window (a node that started a minute ago
  // fills the width), and ends now
  const starts = [...t.members, ...t.leaders].flatMap((l) => l.spans.map((s) => s.start_ms)).concat(t.versions.map((v) => v.start_ms));
  const from = Math.max(t.from_ms, Math.min(...starts, t.to_ms - 1000));
  const to = Math.max(t.to_ms, from + 1);
  const x = (ms) => LABEL + ((Math.min(Math.max(ms, from), to) - from) / (to - from)) * (W - LABEL - 8);
  const colorOf = new Map(); // a node name -> its colour, in the order members are listed
  t.members.forEach((m) => colorOf.set(m.node, COLORS[colorOf.size % COLORS.length]));
  const color = (name) => {
    if (!colorOf.has(name)) colorOf.set(name, COLORS[colorOf.size % COLORS.length]);
    return colorOf.get(name);
  };
  const lanes = [];
  const lane = (key, label, spans, paint) => lanes.push({ key, label, spans, paint });
  for (const m of t.members) {
    lane(`member:${m.node}`, `reaches ${m.node}`, m.spans, (s) => [STATE[s.state], s.state, `${m.node}: ${s.state} from this node`]);
  }
  for (const g of t.leaders) {
    lane(`leader:${g.group}`, `leader of ${g.label}`, g.spans, (s) =>
      s.leader ? [color(s.leader), s.leader, `${g.label}: ${s.leader} leads, term ${s.term}`] : ["#c7c7c7", "none", `${g.label}: no leader (term ${s.term})`],
    );
  }
  const versions = [...new Set(t.versions.map((v) => v.version))];
  lane("version", "version", t.versions, (s) => [COLORS[versions.indexOf(s.version) % COLORS.length], s.version, `Warren ${s.version}`]);
  lane("alarms", "alarms", t.alarms, (s) => ["#d62728", s.alarms.join(", "), `alarm: ${s.alarms.join(", ")}`]);

  const height = AXIS + lanes.length * (LANE + GAP) + 8;
  const root = svg("svg", { viewBox: `0 0 ${W} ${height}`, width: "100%", role: "img", "aria-label": "Audit timeline", "data-test": "audit-timeline", style: "background: #fff; font: 11px system-ui, sans-serif" });
  // the bands behind the lanes: partitions, then the gaps without records
  for (const p of t.partitions) {
    root.append(svg("rect", { x: x(p.start_ms), y: AXIS, width: Math.max(1, x(p.end_ms) - x(p.start_ms)), height: height - AXIS, fill: "rgba(214,39,40,0.12)", "data-band": "partition" },
      tip(`partition: ${p.unreachable.join(", ")} unreachable, ${clock(p.start_ms)} to ${clock(p.end_ms)}`)));
  }
  for (const g of t.gaps) {
    root.append(svg("rect", { x: x(g.start_ms), y: AXIS, width: Math.max(1, x(g.end_ms) - x(g.start_ms)), height: height - AXIS, fill: "rgba(120,120,120,0.15)", "data-band": "gap" },
      tip(`no records ${clock(g.start_ms)} to ${clock(g.end_ms)}: the node was down or not writing`)));
  }
  // the time axis
  const span = to - from;
  const step = STEPS.find((s) => span / s <= 8) || 86400000 * 7;
  for (let tick = Math.ceil(from / step) * step; tick <= to; tick += step) {
    root.append(svg("line", { x1: x(tick), x2: x(tick), y1: AXIS - 4, y2: height, stroke: "#e4e2de" }));
    root.append(svg("text", { x: x(tick), y: AXIS - 8, "text-anchor": "middle", fill: "#5b5b60" }, clock(tick, span > 86400000)));
  }
  lanes.forEach((l, i) => {
    const y = AXIS + i * (LANE + GAP);
    const g = svg("g", { "data-lane": l.key });
    g.append(svg("text", { x: 4, y: y + LANE / 2 + 4, fill: "#1d1d1f" }, l.label.length > 30 ? `${l.label.slice(0, 29)}…` : l.label));
    for (const s of l.spans) {
      const [fill, text, title] = l.paint(s);
      const x0 = x(s.start_ms);
      const w = Math.max(1, x(s.end_ms) - x0);
      g.append(svg("rect", { x: x0, y, width: w, height: LANE, fill, rx: 2, "data-value": text }, tip(`${title}\n${clock(s.start_ms, true)} to ${clock(s.end_ms, true)}`)));
      if (w > text.length * 6.5 + 6) g.append(svg("text", { x: x0 + 4, y: y + LANE / 2 + 4, fill: "#fff", "pointer-events": "none" }, text));
    }
    root.append(g);
  });
  // events: restarts (dashed), leader changes (ticks on their lane), flags enabled (diamonds on the axis)
  for (const r of t.restarts) {
    root.append(svg("line", { x1: x(r.at_ms), x2: x(r.at_ms), y1: AXIS, y2: height, stroke: "#1d1d1f", "stroke-dasharray": "4 3", "data-event": "restart" },
      tip(`restart at ${clock(r.at_ms, true)}: ${r.from_version} -> ${r.to_version}`)));
  }
  for (const c of t.leader_changes) {
    const i = lanes.findIndex((l) => l.key === `leader:${c.group}`);
    if (i < 0) continue;
    const y = AXIS + i * (LANE + GAP);
    root.append(svg("line", { x1: x(c.at_ms), x2: x(c.at_ms), y1: y - 2, y2: y + LANE + 2, stroke: "#1d1d1f", "stroke-width": 2, "data-event": "leader-change" },
      tip(`${c.group}: ${c.from_leader} (term ${c.from_term}) -> ${c.to_leader} (term ${c.to_term})`)));
  }
  for (const f of t.flags) {
    const cx = x(f.enabled_ms);
    root.append(svg("path", { d: `M${cx} ${AXIS - 6} l4 4 l-4 4 l-4 -4 z`, fill: "#1f5fa8", "data-event": "flag" }, tip(`feature flag ${f.flag} enabled`)));
  }
  return root;
}

function eventsTable(t) {
  const rows = [
    ...t.leader_changes.map((c) => [c.at_ms, "leader change", `${c.group}: ${c.from_leader} (term ${c.from_term}) -> ${c.to_leader} (term ${c.to_term})`]),
    ...t.restarts.map((r) => [r.at_ms, "restart", `${r.from_version} -> ${r.to_version}`]),
    ...t.partitions.map((p) => [p.start_ms, "partition", `${p.unreachable.join(", ")} unreachable until ${clock(p.end_ms, true)}`]),
    ...t.flags.map((f) => [f.enabled_ms, "feature flag", `${f.flag} enabled`]),
  ].sort((a, b) => b[0] - a[0]);
  if (!rows.length) return h("p", { class: "empty", "data-test": "audit-events" }, "No leader change, restart, partition or feature flag in this window.");
  return h("table", { "data-test": "audit-events" },
    h("thead", {}, h("tr", {}, ["When", "What", "Details"].map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, rows.slice(0, 200).map(([at, what, details]) => h("tr", {}, h("td", {}, clock(at, true)), h("td", {}, what), h("td", {}, details)))),
  ); // prettier-ignore
}

export async function render(el, ctx) {
  const chosen = Number(ctx.args[0]) || 60;
  const windowSelect = h("select", { name: "minutes", "data-test": "audit-window" },
    WINDOWS.map(([m, label]) => h("option", { value: m, selected: m === chosen }, label)),
  ); // prettier-ignore
  const about = h("p", { class: "hint", "data-test": "audit-about" });
  const chart = h("div", { "data-test": "audit-chart" });
  const events = h("div");
  windowSelect.addEventListener("change", () => ctx.go(`#/audit/${windowSelect.value}`));
  el.append(
    h("h1", {}, title),
    h("p", {}, "This node's own cluster-state snapshots: whom it reached, who led each Raft group it is a member of, its version and restarts (warren audit report draws every node's at once)."),
    h("div", { class: "row" }, h("label", { class: "field" }, h("span", {}, "Window"), windowSelect)),
    about,
    chart,
    h("h2", {}, "Events, newest first"),
    events,
  ); // prettier-ignore

  async function refresh() {
    const t = await ctx.api.get("/api/audit/timeline", { minutes: windowSelect.value });
    if (!t.snapshot_interval) {
      about.textContent = "This node writes no snapshots (setting snapshot_interval is 0).";
    } else {
      const shown = t.leaders.length < (t.groups_total || 0) ? `; ${t.leaders.length} of ${t.groups_total} groups shown (the metadata group, then those whose leader changed most)` : "";
      about.textContent = `${num(t.records)} records of ${t.node ?? "this node"}, one every ${t.snapshot_interval} s${t.cut ? "; the window holds more than is read per request, so it starts later" : ""}${shown}.`;
    }
    chart.replaceChildren(t.records ? draw(t) : h("p", { class: "empty" }, "No snapshot in this window yet."));
    events.replaceChildren(eventsTable(t));
  }
  await refresh();
  ctx.every(REFRESH_MS, refresh);
}
