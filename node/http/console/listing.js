// A listing that the server pages, sorts and filters (the API's ?page=,
// ?page_size=, ?name=, ?use_regex=, ?sort=, ?sort_reverse=): the browser only
// ever holds one page, so 10,000 queues cost what 100 do. Used by the queues
// and connections pages (and any other list that the API paginates).
//
//   listing(el, ctx, {path: "/api/queues", test: "queues", columns: [
//       {label: "Name", sort: "name", cell: (row) => ...}, ...]})
//
// The view's state (page, size, filter, sort) is kept per path for the tab's
// life, so coming back to a list finds it as it was left.

import { h } from "./ui.js";

const PAGE_SIZES = [20, 50, 100, 500];
const states = new Map();

export function listing(el, ctx, { path, columns, test, refreshMs = 5000, defaultSort = "name" }) {
  const state = states.get(path) || { page: 1, pageSize: 100, name: "", regex: false, sort: defaultSort, reverse: false };
  states.set(path, state);

  const filter = h("input", { type: "search", name: "name", value: state.name, "data-test": `${test}-filter` });
  const regex = h("input", { type: "checkbox", name: "use_regex", "data-test": `${test}-regex` });
  regex.checked = state.regex;
  const size = h("select", { name: "page_size", "data-test": `${test}-page-size` },
    PAGE_SIZES.map((n) => h("option", { value: n, selected: n === state.pageSize }, n)),
  ); // prettier-ignore
  const filterForm = h("form", { class: "row", role: "search" },
    h("label", { class: "field" }, h("span", {}, "Filter by name"), filter),
    h("label", {}, regex, " Regular expression"),
    h("label", { class: "field" }, h("span", {}, "Per page"), size),
    h("button", { type: "submit" }, "Apply"),
  ); // prettier-ignore
  filterForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    Object.assign(state, { name: filter.value, regex: regex.checked, pageSize: Number(size.value), page: 1 });
    load();
  });
  size.addEventListener("change", () => filterForm.requestSubmit());

  const summary = h("span", { "data-test": `${test}-summary` });
  const prev = h("button", { type: "button", class: "secondary", "data-test": `${test}-prev` }, "Previous");
  const next = h("button", { type: "button", class: "secondary", "data-test": `${test}-next` }, "Next");
  prev.addEventListener("click", () => {
    state.page--;
    load();
  });
  next.addEventListener("click", () => {
    state.page++;
    load();
  });
  const body = h("div");
  el.append(filterForm, h("div", { class: "pager" }, prev, summary, next), body);

  function header(col) {
    if (!col.sort) return h("th", { scope: "col", class: col.num ? "num" : null }, col.label);
    const active = state.sort === col.sort;
    const button = h("button", { type: "button", class: "sort", "data-sort": col.sort }, col.label, active ? (state.reverse ? " ▼" : " ▲") : "");
    button.addEventListener("click", () => {
      state.reverse = active ? !state.reverse : false;
      state.sort = col.sort;
      state.page = 1;
      load();
    });
    const sortOrder = active ? (state.reverse ? "descending" : "ascending") : null;
    return h("th", { scope: "col", class: col.num ? "num" : null, "aria-sort": sortOrder }, button);
  }

  async function load() {
    let data;
    try {
      data = await ctx.api.get(path, {
        page: state.page,
        page_size: state.pageSize,
        name: state.name,
        use_regex: state.regex && state.name ? "true" : undefined,
        sort: state.sort,
        sort_reverse: state.reverse ? "true" : undefined,
      });
    } catch (e) {
      if (e.error === "page_out_of_range" && state.page > 1) {
        state.page = 1; // the list shrank under the page we were on
        return load();
      }
      throw e;
    }
    const { items, page, page_count: pages, filtered_count: filtered, total_count: total } = data;
    summary.textContent = `Page ${page} of ${Math.max(pages, 1)}: ${items.length} shown, ${filtered} matching, ${total} in all`;
    prev.disabled = page <= 1;
    next.disabled = page >= pages;
    const table = h("table", { "data-test": test },
      h("thead", {}, h("tr", {}, columns.map(header))),
      h("tbody", {}, items.map((row) => h("tr", {}, columns.map((c) => h("td", { class: c.num ? "num" : null }, c.cell(row)))))),
    ); // prettier-ignore
    // a refresh redraws the header: keep the keyboard's place on a sort button
    const focused = document.activeElement?.dataset?.sort;
    body.replaceChildren(items.length ? table : h("p", { class: "empty", "data-test": test }, state.name ? "Nothing matches the filter." : "None yet."));
    if (focused) body.querySelector(`button[data-sort="${focused}"]`)?.focus();
  }

  ctx.every(refreshMs, load);
  return load();
}
