// Exchanges: one page of the list at a time, paged, sorted and filtered by
// the API (GET /api/exchanges?page=&page_size=&name=&use_regex=&sort=), so a
// vhost with thousands of exchanges sends only the rows shown; and a form
// that declares an exchange (PUT /api/exchanges/V/X).

import { actionForm, deleteButton, errorLine, fill, parseJson } from "../forms.js";
import { enc, h, table } from "../ui.js";
import { exchangeHash, exchangeLabel, exchangeSegment } from "../names.js";

export const title = "Exchanges";

const PAGE_SIZES = ["20", "50", "100", "500"];
const TYPES = ["direct", "fanout", "topic", "headers"];

export async function render(el, ctx) {
  const state = { page: 1, pageSize: 50, name: "", regex: false, vhost: "", sort: "name", reverse: false };
  const vhosts = (await ctx.api.get("/api/vhosts")).map((v) => v.name);
  const listing = h("div", { "data-test": "exchanges-listing" });
  const error = errorLine("exchanges-error");

  async function load() {
    error.clear();
    const query = { page: state.page, page_size: state.pageSize, sort: state.sort, sort_reverse: state.reverse };
    if (state.name) Object.assign(query, { name: state.name, use_regex: state.regex });
    const path = state.vhost ? `/api/exchanges/${enc(state.vhost)}` : "/api/exchanges";
    let page;
    try {
      page = await ctx.api.get(path, query);
    } catch (e) {
      if (e.error === "page_out_of_range" && state.page > 1) {  // deletions emptied this page: back to the first
        state.page = 1;
        return load();
      }
      error.show(e);
      return;
    }
    if (page.page_count > 0 && state.page > page.page_count) {  // the last page emptied: show the new last one
      state.page = page.page_count;
      return load();
    }
    listing.replaceChildren(exchangeTable(page.items, state, load), pager(page, state, load));
  }

  const filter = actionForm({
    test: "exchanges-filter", legend: "Filter", submit: "Apply", keep: true,
    fields: [
      { name: "vhost", label: "Virtual host", type: "select", options: [["", "(all)"], ...vhosts] },
      { name: "name", label: "Name contains", placeholder: "text or regular expression" },
      { name: "regex", label: "Regular expression", type: "checkbox" },
      { name: "pageSize", label: "Per page", type: "select", options: PAGE_SIZES, value: String(state.pageSize) },
    ],
    onSubmit: async (values) => {
      Object.assign(state, { vhost: values.vhost, name: values.name, regex: values.regex,
                             pageSize: Number(values.pageSize), page: 1 });
      await load();
    },
  });

  const create = actionForm({
    test: "exchange-create", legend: "Add an exchange", submit: "Add exchange",
    fields: [
      { name: "vhost", label: "Virtual host", type: "select", options: vhosts, value: vhosts[0] },
      { name: "name", label: "Name", required: true },
      { name: "type", label: "Type", type: "select", options: TYPES },
      { name: "durable", label: "Durable", type: "checkbox", value: true },
      { name: "auto_delete", label: "Auto-delete", type: "checkbox" },
      { name: "internal", label: "Internal", type: "checkbox" },
      { name: "arguments", label: "Arguments (JSON)", type: "textarea", placeholder: '{"alternate-exchange": "ae"}' },
    ],
    onSubmit: async (values) => {
      const body = { type: values.type, durable: values.durable, auto_delete: values.auto_delete,
                     internal: values.internal, arguments: parseJson(values.arguments, "Arguments") };
      await ctx.api.put(`/api/exchanges/${enc(values.vhost)}/${exchangeSegment(values.name)}`, body);
      ctx.toast(`Exchange ${values.name} declared`, "ok");
      await load();
    },
  });

  fill(el, h("h1", {}, "Exchanges"), filter, error, listing, create);
  await load();

  // The column headings sort on the server; a second click reverses.
  function exchangeTable(items, state, reload) {
    const sortable = (label, field) => h("button", {
      type: "button", class: "sort", "data-test": `exchanges-sort-${field}`,
      onclick: () => {
        state.reverse = state.sort === field ? !state.reverse : false;
        state.sort = field;
        reload();
      },
    }, label, state.sort === field ? (state.reverse ? " ▼" : " ▲") : "");
    const columns = [
      [sortable("Name", "name"), (x) => h("a", { href: exchangeHash(x.vhost, x.name), "data-test": "exchange-link" },
                                         exchangeLabel(x.name))],
      [sortable("Virtual host", "vhost"), (x) => x.vhost],
      [sortable("Type", "type"), (x) => x.type],
      ["Features", (x) => features(x)],
      ["", (x) => builtin(x) ? "" : deleteButton({
        label: "Delete", test: "exchange-delete", question: `Delete exchange ${x.name} in ${x.vhost}?`,
        act: async () => {
          await ctx.api.del(`/api/exchanges/${enc(x.vhost)}/${exchangeSegment(x.name)}`);
          ctx.toast(`Exchange ${x.name} deleted`, "ok");
          await reload();
        },
        onError: (e) => error.show(e),
      })],
    ];
    return table(columns, items, { test: "exchanges-table", empty: "No exchange matches.",
                   rowTest: (x) => `exchange-${x.vhost}-${x.name}` });
  }
}

function builtin(x) {
  return x.name === "" || x.name.startsWith("amq.");
}

function features(x) {
  const out = [];
  if (x.durable) out.push(h("abbr", { title: "durable" }, "D"));
  if (x.auto_delete) out.push(h("abbr", { title: "auto-delete" }, "AD"));
  if (x.internal) out.push(h("abbr", { title: "internal" }, "I"));
  for (const [key, value] of Object.entries(x.arguments || {})) out.push(h("abbr", { title: String(value) }, key));
  return out.flatMap((f, i) => (i ? [" ", f] : [f]));
}

// "Page 2 of 7 (312 of 1,024 exchanges match)" with previous and next buttons.
function pager(page, state, reload) {
  const go = (n) => () => {
    state.page = n;
    reload();
  };
  return h("nav", { class: "pager", "aria-label": "pages", "data-test": "exchanges-pager" },
    h("button", { type: "button", "data-test": "exchanges-prev", disabled: page.page <= 1, onclick: go(page.page - 1) },
      "Previous"),
    h("span", { "data-test": "exchanges-page" },
      ` Page ${page.page} of ${Math.max(page.page_count, 1)} (${page.filtered_count} of ${page.total_count} match) `),
    h("button", { type: "button", "data-test": "exchanges-next", disabled: page.page >= page.page_count,
                  onclick: go(page.page + 1) }, "Next"));
}
