// One exchange (#/exchange/<vhost>/<name>): its settings, the bindings it
// routes to and those that route to it, with forms to bind, unbind, publish a
// message (POST /api/exchanges/V/X/publish) and delete the exchange.

import { actionForm, deleteButton, errorLine, fill, parseJson } from "../forms.js";
import { enc, h, table } from "../ui.js";
import { DEFAULT_EXCHANGE_PATH, exchangeHash, exchangeLabel, exchangeSegment } from "../names.js";

export const title = "Exchange";

const KINDS = { queue: "q", exchange: "e" };  // a binding's destination kind in /api/bindings paths

export async function render(el, ctx) {
  const [vhost, rawName] = ctx.args;
  if (vhost === undefined || rawName === undefined) {
    fill(el, h("p", { class: "error", role: "alert" }, "No exchange named: the address is #/exchange/<vhost>/<name>."));
    return;
  }
  const name = rawName === DEFAULT_EXCHANGE_PATH ? "" : rawName;
  const base = `/api/exchanges/${enc(vhost)}/${exchangeSegment(name)}`;
  const exchange = await ctx.api.get(base);
  const error = errorLine("exchange-error");
  const bindings = h("div", { "data-test": "exchange-bindings" });

  async function loadBindings() {
    try {
      // the default exchange is bound to every queue: a vhost of 10,000 queues would list 10,000 rows
      const [out, into] = await Promise.all([name === "" ? null : ctx.api.get(`${base}/bindings/source`),
                                             ctx.api.get(`${base}/bindings/destination`)]);
      bindings.replaceChildren(
        h("h2", {}, "Bindings from this exchange"),
        out ? bindingTable("bindings-source", out, "destination") : h("p", { "data-test": "bindings-source" },
          "The default exchange is bound to every queue, with the queue's name as the routing key; "
          + "these bindings cannot be removed, and no other can be added."),
        h("h2", {}, "Bindings to this exchange"), bindingTable("bindings-destination", into, "source"));
    } catch (e) {
      error.show(e);
    }
  }

  // `end` is the column that names the other side: the destination of a
  // binding from this exchange, the source of one into it.
  function bindingTable(test, rows, end) {
    const columns = [
      [end === "source" ? "From exchange" : "To", (b) => other(b, end)],
      ["Routing key", (b) => h("code", {}, b.routing_key)],
      ["Arguments", (b) => (Object.keys(b.arguments || {}).length ? h("code", {}, JSON.stringify(b.arguments)) : "")],
      ["", (b) => deleteButton({
        label: "Unbind", test: "binding-delete", question: `Remove the binding to ${b.destination} (key "${b.routing_key}")?`,
        act: async () => {
          await ctx.api.del(`/api/bindings/${enc(vhost)}/e/${exchangeSegment(b.source)}/${KINDS[b.destination_type]}/`
                            + `${enc(b.destination)}/${enc(b.properties_key)}`);
          ctx.toast("Binding removed", "ok");
          await loadBindings();
        },
        onError: (e) => error.show(e),
      })],
    ];
    return table(columns, rows, { test, empty: "No bindings.",
                   rowTest: (b) => `binding-${b.destination_type}-${b[end]}-${b.routing_key}` });
  }

  function other(b, end) {
    if (end === "source") return h("a", { href: exchangeHash(vhost, b.source) }, exchangeLabel(b.source));
    if (b.destination_type === "exchange") return h("a", { href: exchangeHash(vhost, b.destination) }, b.destination);
    return h("a", { href: `#/queue/${enc(vhost)}/${enc(b.destination)}` }, `queue ${b.destination}`);
  }

  const bind = actionForm({
    test: "binding-create", legend: "Add a binding from this exchange", submit: "Bind",
    fields: [
      { name: "kind", label: "To", type: "select", options: [["queue", "queue"], ["exchange", "exchange"]] },
      { name: "destination", label: "Name", required: true },
      { name: "routing_key", label: "Routing key" },
      { name: "arguments", label: "Arguments (JSON)", type: "textarea", placeholder: '{"x-match": "all"}' },
    ],
    onSubmit: async (v) => {
      await ctx.api.post(`/api/bindings/${enc(vhost)}/e/${exchangeSegment(name)}/${KINDS[v.kind]}/${enc(v.destination)}`,
                         { routing_key: v.routing_key, arguments: parseJson(v.arguments, "Arguments") });
      ctx.toast("Binding added", "ok");
      await loadBindings();
    },
  });

  const result = h("p", { "data-test": "publish-result", role: "status" });
  const publish = actionForm({
    test: "publish", legend: "Publish a message", submit: "Publish message", keep: true,
    fields: [
      { name: "routing_key", label: "Routing key" },
      { name: "delivery_mode", label: "Delivery mode", type: "select",
        options: [["1", "1 - non-persistent"], ["2", "2 - persistent"]] },
      { name: "headers", label: "Headers (JSON)", type: "textarea", placeholder: '{"region": "eu"}' },
      { name: "properties", label: "Properties (JSON)", type: "textarea",
        placeholder: '{"content_type": "text/plain", "message_id": "m1"}' },
      { name: "payload", label: "Payload", type: "textarea", rows: 5 },
      { name: "payload_encoding", label: "Payload encoding", type: "select", options: ["string", "base64"] },
    ],
    onSubmit: async (v) => {
      result.textContent = "";
      const properties = { ...parseJson(v.properties, "Properties"), delivery_mode: Number(v.delivery_mode) };
      const headers = parseJson(v.headers, "Headers");
      if (Object.keys(headers).length) properties.headers = headers;
      const answer = await ctx.api.post(`${base}/publish`, { routing_key: v.routing_key, payload: v.payload,
                                                             payload_encoding: v.payload_encoding, properties });
      result.textContent = answer && answer.routed ? "Message published and routed."
        : "Message published, but not routed: no binding matched.";
    },
  });

  const remove = builtinName(name) ? null : h("section", { "data-test": "exchange-delete-section" },
    h("h2", {}, "Delete this exchange"),
    deleteButton({
      label: "Delete", test: "exchange-delete", question: `Delete exchange ${name} in ${vhost}?`,
      act: async () => {
        await ctx.api.del(base);
        ctx.toast(`Exchange ${name} deleted`, "ok");
        ctx.go("#/exchanges");
      },
      onError: (e) => error.show(e),
    }));

  fill(el,
    h("h1", {}, "Exchange ", h("span", { "data-test": "exchange-name" }, exchangeLabel(name)), ` in ${vhost}`),
    details(exchange), error, bindings, name === "" ? null : bind, publish, result, remove);
  await loadBindings();
  ctx.every(5000, loadBindings);  // bindings made elsewhere (a client, another operator) appear
}

function builtinName(name) {
  return name === "" || name.startsWith("amq.");
}

function details(x) {
  const rows = [["Type", x.type], ["Durable", yes(x.durable)], ["Auto-delete", yes(x.auto_delete)],
                ["Internal", yes(x.internal)], ["Arguments", JSON.stringify(x.arguments || {})]];
  return h("table", { class: "details", "data-test": "exchange-details" },
    h("tbody", {}, rows.map(([k, v]) => h("tr", {}, h("th", { scope: "row" }, k), h("td", { "data-test": `exchange-${k}` }, v)))));
}

function yes(flag) {
  return flag ? "yes" : "no";
}
