// Connections: every AMQP connection the user may see, paged by the server.
import { listing } from "../listing.js";
import { bytes, enc, h, link, num } from "../ui.js";

export const title = "Connections";

export async function render(el, ctx) {
  el.append(h("h1", {}, "Connections"));
  await listing(el, ctx, {
    path: "/api/connections",
    test: "connections",
    columns: [
      { label: "Name", sort: "name", cell: (c) => link(`#/connection/${enc(c.name)}`, c.name, "connection-link") },
      { label: "User", sort: "user", cell: (c) => c.user },
      { label: "Virtual host", sort: "vhost", cell: (c) => c.vhost },
      { label: "Protocol", sort: "protocol", cell: (c) => c.protocol },
      { label: "TLS", sort: "ssl", cell: (c) => (c.ssl ? "yes" : "no") },
      { label: "State", sort: "state", cell: (c) => c.state },
      { label: "Sessions", sort: "channels", num: true, cell: (c) => num(c.channels) },
      { label: "Received", sort: "recv_oct", num: true, cell: (c) => bytes(c.recv_oct) },
      { label: "Sent", sort: "send_oct", num: true, cell: (c) => bytes(c.send_oct) },
      { label: "Connected", sort: "connected_at", cell: (c) => new Date(c.connected_at).toLocaleString() },
    ],
  });
}
