// Exchanges: one page of the server's sorted, filtered list at a time
// (listing.js, as the queues page), and a form that declares an exchange
// (PUT /api/exchanges/V/X). Deleting is on each exchange's page, as in
// RabbitMQ's UI.

import { actionForm, parseJson } from "../forms.js";
import { listing } from "../listing.js";
import { enc, h, link } from "../ui.js";
import { exchangeHash, exchangeLabel, exchangeSegment } from "../names.js";

export const title = "Exchanges";

const TYPES = ["direct", "fanout", "topic", "headers"];

function features(x) {
  const flags = [x.durable && "D", x.auto_delete && "AD", x.internal && "I"].filter(Boolean);
  return [...flags, ...Object.keys(x.arguments || {})].join(" ");
}

async function declareForm(ctx) {
  const vhosts = (await ctx.api.get("/api/vhosts")).map((v) => v.name);
  return actionForm({
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
    onSubmit: async (v) => {
      const body = { type: v.type, durable: v.durable, auto_delete: v.auto_delete, internal: v.internal,
                     arguments: parseJson(v.arguments, "Arguments") };
      await ctx.api.put(`/api/exchanges/${enc(v.vhost)}/${exchangeSegment(v.name)}`, body);
      ctx.toast(`Exchange ${v.name} declared`, "ok");
      ctx.go(exchangeHash(v.vhost, v.name));
    },
  });
}

export async function render(el, ctx) {
  el.append(h("h1", {}, "Exchanges"));
  await listing(el, ctx, {
    path: "/api/exchanges",
    test: "exchanges",
    rowTest: (x) => `exchange-${x.vhost}-${x.name}`,
    columns: [
      { label: "Virtual host", sort: "vhost", cell: (x) => x.vhost },
      { label: "Name", sort: "name", cell: (x) => link(exchangeHash(x.vhost, x.name), exchangeLabel(x.name), "exchange-link") },
      { label: "Type", sort: "type", cell: (x) => x.type },
      { label: "Features", cell: features },
    ],
  });
  el.append(await declareForm(ctx));
}
