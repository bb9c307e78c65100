// Raft groups: every replicated group this node knows (GET /api/raft/groups):
// the metadata group, each quorum queue's Raft group and each replicated
// stream, with leader, term (a stream's epoch), commit index (a stream's
// committed offset) and each member's matched log and lag, live.
//
// The API pages the groups (50 here), filters them by name and type, and
// reads only the page's: a cluster with thousands of quorum queues costs the
// same as one with ten. Only a group's leader knows how far its followers are:
// on another node their lag shows as "?" with the leader to ask.
//
// Route: #/raft[/<name filter>]

import { enc, field, h, num } from "../ui.js";

export const title = "Raft groups";

const REFRESH_MS = 2000;
const PAGE_SIZE = 50;

function memberCell(g, m) {
  const lag = m.lag === null ? h("span", { title: `known on the leader's node (${g.leader ?? "none"})` }, "?") : num(m.lag);
  return h("li", { "data-member": m.node, "data-lag": m.lag ?? "" },
    h("b", {}, m.node), m.leader ? " (leader)" : "", m.reachable ? "" : h("span", { class: "alarm" }, " unreachable"),
    h("span", { class: "hint" }, " matched "), m.match_index === null ? "?" : num(m.match_index),
    h("span", { class: "hint" }, " lag "), lag,
  ); // prettier-ignore
}

function groupName(g) {
  if (g.type === "metadata") return "metadata";
  return h("a", { href: `#/queue/${enc(g.vhost)}/${enc(g.queue)}` }, g.queue, g.vhost === "/" ? "" : ` (vhost ${g.vhost})`);
}

function groupsTable(items) {
  if (!items.length) return h("p", { class: "empty", "data-test": "raft-groups" }, "No replicated group matches.");
  return h("table", { "data-test": "raft-groups" },
    h("thead", {}, h("tr", {}, ["Group", "Type", "Leader", "Term", "Commit index", "This node", "Members"].map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, items.map((g) => h("tr", { "data-group": g.name, "data-type": g.type },
      h("td", {}, groupName(g), g.type === "quorum" ? h("div", { class: "hint" }, g.name) : ""),
      h("td", {}, g.type),
      h("td", { "data-test": "leader" }, g.leader ?? h("span", { class: "alarm" }, "none")),
      h("td", { class: "num", "data-test": "term" }, g.term === null ? "" : num(g.term)),
      h("td", { class: "num", "data-test": "commit" }, g.commit_index === null ? "" : num(g.commit_index)),
      h("td", {}, g.role ?? h("span", { class: "hint" }, "not a member")),
      h("td", {}, h("ul", { class: "members", style: "list-style: none; margin: 0; padding: 0" }, g.members.map((m) => memberCell(g, m)))),
    ))),
  ); // prettier-ignore
}

export async function render(el, ctx) {
  let page = 1;
  const name = h("input", { name: "name", type: "search", value: ctx.args[0] || "", "data-test": "raft-filter" });
  const type = h("select", { name: "type", "data-test": "raft-type" },
    [["", "every type"], ["metadata", "metadata"], ["quorum", "quorum queues"], ["stream", "streams"]].map(([v, l]) => h("option", { value: v }, l)),
  ); // prettier-ignore
  const counts = h("p", { class: "hint", "data-test": "raft-count" });
  const prev = h("button", { type: "button", class: "secondary", "data-test": "raft-prev" }, "Previous page");
  const next = h("button", { type: "button", class: "secondary", "data-test": "raft-next" }, "Next page");
  const box = h("div");
  const filters = h("form", { class: "row", role: "search" }, field("Name, vhost or queue contains", name), field("Type", type));
  el.append(h("h1", {}, title), filters, counts, box, h("div", { class: "actions" }, prev, next));

  async function refresh() {
    let r;
    try {
      r = await ctx.api.get("/api/raft/groups", { page, page_size: PAGE_SIZE, name: name.value.trim(), type: type.value });
    } catch (e) {
      if (e.error !== "page_out_of_range" || page === 1) throw e;
      page = 1; // groups went away under this page
      return refresh();
    }
    counts.textContent = `${num(r.filtered_count)} of ${num(r.total_count)} groups, page ${r.page} of ${Math.max(r.page_count, 1)}; refreshed every ${REFRESH_MS / 1000} s`;
    prev.disabled = r.page <= 1;
    next.disabled = r.page >= r.page_count;
    box.replaceChildren(groupsTable(r.items));
  }
  const again = () => {
    page = 1;
    refresh().catch((e) => ctx.toast(e.reason || e.message, "error"));
  };
  filters.addEventListener("submit", (ev) => {
    ev.preventDefault();
    again();
  });
  name.addEventListener("input", again);
  type.addEventListener("change", again);
  prev.addEventListener("click", () => {
    page = Math.max(1, page - 1);
    refresh().catch((e) => ctx.toast(e.reason || e.message, "error"));
  });
  next.addEventListener("click", () => {
    page += 1;
    refresh().catch((e) => ctx.toast(e.reason || e.message, "error"));
  });
  await refresh();
  ctx.every(REFRESH_MS, refresh);
}
