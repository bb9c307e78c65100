// Audit: every member's cluster-state snapshots as one timeline, what `warren audit
// report` draws, live: for each node, whom it reached (a red band: it saw a
// partition), who led each Raft group it is a member of and in which term, its
// version and restarts, alarms; feature flags enabled are diamonds on the axis.
//
// Data: the members from GET /api/raft/groups?type=metadata, then each member's
// GET /api/audit/timeline?node=NAME (the member computes its own from its files
// and this node asks it over the cluster). Hand-drawn SVG sharing one time axis;
// every span has a <title> with its details, and the events are a table below.
//
// Route: #/audit[/<minutes>]

import { h, num } from "../ui.js";

export const title = "Audit";

const NS = "http://www.w3.org/2000/svg";
const W = 1100;
const LABEL = 200; // the lanes' names, left of the time axis
const LANE = 20;
const GAP = 5;
const HEAD = 24; // a node's name above its lanes
const AXIS = 24;
const MAX_LEADER_LANES = 8; // per node: the metadata group, then the groups whose leader changed most
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

// The lanes of one node's timeline: [key, label, spans, paint(span) -> [fill, text, title]].
function lanesOf(t, color) {
  const lanes = [];
  const others = t.members.length > 1 ? t.members.filter((m) => m.address !== t.member_id) : t.members;
  for (const m of others) {
    lanes.push([`reach:${m.node}`, `reaches ${m.node}`, m.spans, (s) => [STATE[s.state], s.state, `${t.node} -> ${m.node}: ${s.state}`]]);
  }
  for (const g of t.leaders.slice(0, MAX_LEADER_LANES)) {
    lanes.push([`leader:${g.group}`, `leader of ${g.label}`, g.spans, (s) =>
      s.leader ? [color(s.leader), s.leader, `${g.label}: ${s.leader} leads, term ${s.term}`] : ["#c7c7c7", "none", `${g.label}: no leader (term ${s.term})`]]); // prettier-ignore
  }
  const versions = [...new Set(t.versions.map((v) => v.version))];
  lanes.push(["version", "version", t.versions, (s) => [COLORS[versions.indexOf(s.version) % COLORS.length], s.version, `${t.node} runs Warren ${s.version}`]]);
  if (t.alarms.length) lanes.push(["alarms", "alarms", t.alarms, (s) => ["#d62728", s.alarms.join(", "), `alarm on ${t.node}: ${s.alarms.join(", ")}`]]);
  return lanes;
}

// Draws the nodes' timelines (those that answered) into one <svg> with one time axis.
function draw(timelines, names) {
  const starts = timelines.flatMap((t) => [...t.members, ...t.leaders].flatMap((l) => l.spans.map((s) => s.start_ms)).concat(t.versions.map((v) => v.start_ms)));
  const to = Math.max(...timelines.map((t) => t.to_ms));
  // the axis starts at the first record in the window (a cluster started a minute ago fills the width)
  const from = Math.max(Math.min(...timelines.map((t) => t.from_ms)), Math.min(...starts, to - 1000));
  const x = (ms) => LABEL + ((Math.min(Math.max(ms, from), to) - from) / Math.max(to - from, 1)) * (W - LABEL - 8);
  const colorOf = new Map(names.map((n, i) => [n, COLORS[i % COLORS.length]]));
  const color = (name) => {
    if (!colorOf.has(name)) colorOf.set(name, COLORS[colorOf.size % COLORS.length]);
    return colorOf.get(name);
  };
  const sections = timelines.map((t) => ({ t, lanes: lanesOf(t, color) }));
  const height = AXIS + sections.reduce((sum, s) => sum + HEAD + s.lanes.length * (LANE + GAP), 0) + 6;
  const root = svg("svg", { viewBox: `0 0 ${W} ${height}`, width: "100%", role: "img", "aria-label": "Audit timeline", "data-test": "audit-timeline", style: "background: #fff; font: 11px system-ui, sans-serif" });
  const span = to - from;
  const step = STEPS.find((s) => span / s <= 8) || 86400000 * 7;
  for (let tick = Math.ceil(from / step) * step; tick <= to; tick += step) {
    root.append(svg("line", { x1: x(tick), x2: x(tick), y1: AXIS - 4, y2: height, stroke: "#e4e2de" }));
    root.append(svg("text", { x: x(tick), y: AXIS - 8, "text-anchor": "middle", fill: "#5b5b60" }, clock(tick, span > 86400000)));
  }
  const flags = new Map(); // a flag -> when the first node saw it enabled
  let top = AXIS;
  for (const { t, lanes } of sections) {
    const g = svg("g", { "data-node": t.node });
    const bottom = top + HEAD + lanes.length * (LANE + GAP);
    g.append(svg("text", { x: 4, y: top + HEAD - 7, "font-weight": 700, fill: "#1d1d1f" }, t.node));
    g.append(svg("line", { x1: 0, x2: W, y1: top + 2, y2: top + 2, stroke: "#c9c6c0" }));
    for (const p of t.partitions) {
      g.append(svg("rect", { x: x(p.start_ms), y: top + HEAD - 4, width: Math.max(1, x(p.end_ms) - x(p.start_ms)), height: bottom - top - HEAD + 4, fill: "rgba(214,39,40,0.12)", "data-band": "partition" },
        tip(`${t.node} reached no ${p.unreachable.join(", ")}: ${clock(p.start_ms)} to ${clock(p.end_ms)}`))); // prettier-ignore
    }
    for (const gap of t.gaps) {
      g.append(svg("rect", { x: x(gap.start_ms), y: top + HEAD - 4, width: Math.max(1, x(gap.end_ms) - x(gap.start_ms)), height: bottom - top - HEAD + 4, fill: "rgba(120,120,120,0.18)", "data-band": "gap" },
        tip(`no records of ${t.node} ${clock(gap.start_ms)} to ${clock(gap.end_ms)}: down or not writing`))); // prettier-ignore
    }
    lanes.forEach(([key, label, spans, paint], i) => {
      const y = top + HEAD + i * (LANE + GAP);
      const lane = svg("g", { "data-lane": key });
      lane.append(svg("text", { x: 12, y: y + LANE / 2 + 4, fill: "#1d1d1f" }, label.length > 30 ? `${label.slice(0, 29)}…` : label));
      for (const s of spans) {
        const [fill, text, title] = paint(s);
        const x0 = x(s.start_ms);
        const w = Math.max(1, x(s.end_ms) - x0);
        lane.append(svg("rect", { x: x0, y, width: w, height: LANE, fill, rx: 2, "data-value": text }, tip(`${title}\n${clock(s.start_ms, true)} to ${clock(s.end_ms, true)}`)));
        if (w > text.length * 6.5 + 6) lane.append(svg("text", { x: x0 + 4, y: y + LANE / 2 + 4, fill: "#fff", "pointer-events": "none" }, text));
      }
      for (const c of t.leader_changes.filter((c) => key === `leader:${c.group}`)) {
        lane.append(svg("line", { x1: x(c.at_ms), x2: x(c.at_ms), y1: y - 2, y2: y + LANE + 2, stroke: "#1d1d1f", "stroke-width": 2, "data-event": "leader-change" },
          tip(`${c.label}: ${c.from_leader} (term ${c.from_term}) -> ${c.to_leader} (term ${c.to_term})`))); // prettier-ignore
      }
      g.append(lane);
    });
    for (const r of t.restarts) {
      g.append(svg("line", { x1: x(r.at_ms), x2: x(r.at_ms), y1: top + HEAD - 4, y2: bottom, stroke: "#1d1d1f", "stroke-dasharray": "4 3", "data-event": "restart" },
        tip(`${t.node} restarted at ${clock(r.at_ms, true)}: ${r.from_version} -> ${r.to_version}`))); // prettier-ignore
    }
    for (const f of t.flags) if (!flags.has(f.flag) || flags.get(f.flag) > f.enabled_ms) flags.set(f.flag, f.enabled_ms);
    root.append(g);
    top = bottom;
  }
  for (const [flag, at] of flags) {
    const cx = x(at);
    root.append(svg("path", { d: `M${cx} ${AXIS - 6} l4 4 l-4 4 l-4 -4 z`, fill: "#1f5fa8", "data-event": "flag" }, tip(`feature flag ${flag} enabled`)));
  }
  return root;
}

// [[at, [flag, ...]], ...]: the flags a node saw enabled in one record, together
function flagsAt(flags) {
  const at = new Map();
  for (const f of flags) at.set(f.enabled_ms, [...(at.get(f.enabled_ms) || []), f.flag]);
  return [...at];
}

function eventsTable(timelines) {
  const rows = timelines.flatMap((t) => [
    ...t.leader_changes.map((c) => [c.at_ms, t.node, "leader change", `${c.label}: ${c.from_leader} (term ${c.from_term}) -> ${c.to_leader} (term ${c.to_term})`]),
    ...t.restarts.map((r) => [r.at_ms, t.node, "restart", `${r.from_version} -> ${r.to_version}`]),
    ...t.partitions.map((p) => [p.start_ms, t.node, "partition", `reached no ${p.unreachable.join(", ")} until ${clock(p.end_ms, true)}`]),
    ...flagsAt(t.flags).map(([at, flags]) => [at, t.node, flags.length > 1 ? "feature flags" : "feature flag", `${flags.join(", ")} enabled`]),
  ]);
  rows.sort((a, b) => b[0] - a[0]);
  if (!rows.length) return h("p", { class: "empty", "data-test": "audit-events" }, "No leader change, restart, partition or feature flag in this window.");
  return h("table", { "data-test": "audit-events" },
    h("thead", {}, h("tr", {}, ["When", "Node", "What", "Details"].map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, rows.slice(0, 200).map(([at, node, what, details]) => h("tr", {}, h("td", {}, clock(at, true)), h("td", {}, node), h("td", {}, what), h("td", {}, details)))),
  ); // prettier-ignore
}

function about(t, name) {
  if (!t.snapshot_interval) return `${name} writes no snapshots (setting snapshot_interval is 0).`;
  if (!t.records) return `${name}: no records in this window yet.`;
  const shown = t.leaders.length > MAX_LEADER_LANES || t.leaders.length < (t.groups_total || 0)
    ? `; ${Math.min(t.leaders.length, MAX_LEADER_LANES)} of its ${t.groups_total} Raft groups drawn (the metadata group, then those whose leader changed most)` : ""; // prettier-ignore
  return `${t.node}: ${num(t.records)} records, one every ${t.snapshot_interval} s${t.cut ? "; more than is read per request: the window starts later" : ""}${shown}.`;
}

export async function render(el, ctx) {
  const chosen = Number(ctx.args[0]) || 60;
  const windowSelect = h("select", { name: "minutes", "data-test": "audit-window" },
    WINDOWS.map(([m, label]) => h("option", { value: m, selected: m === chosen }, label)),
  ); // prettier-ignore
  const notes = h("ul", { class: "hint", "data-test": "audit-about" });
  const chart = h("div", { "data-test": "audit-chart" });
  const events = h("div");
  windowSelect.addEventListener("change", () => ctx.go(`#/audit/${windowSelect.value}`));
  el.append(
    h("h1", {}, title),
    h("p", {}, "Each node's own cluster-state snapshots: whom it reached, who led each Raft group it is a member of, its version and restarts (warren audit report draws the same from collected files)."),
    h("div", { class: "row" }, h("label", { class: "field" }, h("span", {}, "Window"), windowSelect)),
    notes,
    chart,
    h("h2", {}, "Events, newest first"),
    events,
  ); // prettier-ignore

  async function refresh() {
    const minutes = windowSelect.value;
    const meta = (await ctx.api.get("/api/raft/groups", { type: "metadata" })).items[0];
    const names = meta ? meta.members.map((m) => m.node) : [];
    const answers = await Promise.all(
      (names.length ? names : [null]).map((node) =>
        ctx.api.get("/api/audit/timeline", { minutes, node }).then((t) => ({ t }), (e) => ({ node, error: e.reason || e.message })),
      ),
    );
    const timelines = answers.filter((a) => a.t && a.t.records).map((a) => a.t);
    notes.replaceChildren(
      ...answers.map((a) => h("li", { "data-node": a.node ?? "" }, a.t ? about(a.t, a.node ?? "This node") : `${a.node} did not answer: ${a.error}`)),
    );
    chart.replaceChildren(timelines.length ? draw(timelines, names) : h("p", { class: "empty" }, "No snapshot in this window yet."));
    events.replaceChildren(eventsTable(timelines));
  }
  await refresh();
  ctx.every(REFRESH_MS, refresh);
}
