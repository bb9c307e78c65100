// One connection: its details, its AMQP 1.0 sessions with their windows and
// links (credit, delivery count, unsettled), and a button that closes it.
import { bytes, enc, facts, h, json, num, table } from "../ui.js";

export const title = "Connection";

function sessionView(s) {
  const incoming = table(
    [
      ["Handle", (l) => l.handle],
      ["Link", (l) => l.link_name],
      ["Target", (l) => l.target_address],
      ["Credit", (l) => num(l.credit)],
      ["Delivery count", (l) => num(l.delivery_count)],
      ["Settle mode", (l) => l.snd_settle_mode],
      ["Unconfirmed", (l) => num(l.unconfirmed_messages)],
    ],
    s.incoming_links || [],
    { test: "incoming-links", empty: "No link publishes to the broker." },
  );
  const outgoing = table(
    [
      ["Handle", (l) => l.handle],
      ["Link", (l) => l.link_name],
      ["Source", (l) => l.source_address],
      ["Queue", (l) => l.queue_name],
      ["Credit", (l) => num(l.credit)],
      ["Delivery count", (l) => num(l.delivery_count)],
      ["Settled", (l) => (l.send_settled ? "pre-settled" : "unsettled")],
      ["Filter", (l) => json(l.filter)],
    ],
    s.outgoing_links || [],
    { test: "outgoing-links", empty: "No link consumes from the broker." },
  );
  return h("section", { class: "card", "data-test": "session" },
    h("h3", {}, `Session on channel ${s.channel_number}`),
    facts([
      ["Incoming window", num(s.incoming_window)],
      ["Remote incoming window", num(s.remote_incoming_window)],
      ["Remote outgoing window", num(s.remote_outgoing_window)],
      ["Next incoming id", num(s.next_incoming_id)],
      ["Next outgoing id", num(s.next_outgoing_id)],
      ["Unsettled deliveries out", num(s.outgoing_unsettled_deliveries)],
      ["Handle max", num(s.handle_max)],
    ]),
    h("h4", {}, "Incoming links (client to broker)"), incoming,
    h("h4", {}, "Outgoing links (broker to client)"), outgoing,
  ); // prettier-ignore
}

export async function render(el, ctx) {
  const [name] = ctx.args;
  const path = `/api/connections/${enc(name)}`;
  const details = h("div");
  const sessions = h("div", { "data-test": "sessions" });
  const close = h("button", { type: "button", class: "danger", "data-test": "close-connection" }, "Close connection");
  close.addEventListener("click", async () => {
    if (!confirm(`Close connection ${name}?`)) return;
    try {
      await ctx.api.del(path);
      ctx.toast(`Connection ${name} closed`, "ok");
      ctx.go("#/connections");
    } catch (e) {
      ctx.toast(e.reason, "error");
    }
  });
  el.append(h("p", {}, h("a", { href: "#/connections" }, "Connections")), h("h1", {}, name), details, h("div", { class: "actions" }, close), h("h2", {}, "Sessions"), sessions);

  async function refresh() {
    const [c, ss] = await Promise.all([ctx.api.get(path), ctx.api.get(`${path}/sessions`)]);
    details.replaceChildren(
      facts([
        ["User", c.user],
        ["Virtual host", c.vhost],
        ["Protocol", c.protocol],
        ["Node", c.node],
        ["Client", `${c.peer_host}:${c.peer_port}`],
        ["State", c.state],
        ["TLS", c.ssl ? `yes ${c.ssl_protocol || ""}` : "no"],
        ["Peer certificate", c.peer_cert_subject],
        ["Sessions", num(c.channels)],
        ["Max frame size", bytes(c.frame_max)],
        ["Idle timeout", `${c.timeout} s`],
        ["Received", `${bytes(c.recv_oct)} in ${num(c.recv_cnt)} frames`],
        ["Sent", `${bytes(c.send_oct)} in ${num(c.send_cnt)} frames`],
        ["Connected at", new Date(c.connected_at).toLocaleString()],
        ["Client properties", json(c.client_properties)],
      ], "connection-details"),
    ); // prettier-ignore
    sessions.replaceChildren(...(ss.length ? ss.map(sessionView) : [h("p", { class: "empty" }, "No session open.")]));
  }
  await refresh();
  ctx.every(5000, refresh);
}
