"""`warren ctl`'s maintenance and placement commands: drain, revive (RabbitMQ's
`rabbitmq-upgrade drain` / `revive`), maintenance_status and rebalance (RabbitMQ's
`rabbitmq-queues rebalance quorum`)."""

from __future__ import annotations

import argparse

from node.ops.ctl_kit import Client, CommandTable, Listing, Report, table

COMMANDS = CommandTable()


def _drain_report(r: dict) -> Report:
    lines = [f"Drained node {r['node']} in {r['seconds']}s: {r['connections_closed']} client connections closed,"
             f" {len(r['moved'])} leaderships handed over"]  # fmt: skip
    if r["moved"]:
        lines.append(table([{"group": g, "new_leader": n} for g, n in r["moved"].items()], ["group", "new_leader"]))
    if r.get("streams_moved"):
        lines.append(table(r["streams_moved"], ["vhost", "name", "new_leader"]))
    if r.get("streams_still_leading"):
        kept = ", ".join(f"{s['name']} (vhost {s['vhost']})" for s in r["streams_still_leading"])
        lines.append(f"NOT DONE: still leading streams {kept} (run drain again)")
    if r.get("streams_no_successor"):
        alone = ", ".join(f"{s['name']} (vhost {s['vhost']})" for s in r["streams_no_successor"])
        lines.append(f"streams with no other replica to take over: {alone}")
    if r["still_leading"]:
        lines.append(f"NOT DONE: still leading {', '.join(r['still_leading'])} (run drain again)")
    if r["no_successor"]:
        lines.append(f"no reachable member could take over {', '.join(r['no_successor'])}")
    return Report(r, "\n".join(lines))


@COMMANDS.command("drain", "put the node in maintenance: refuse and close client connections, hand its leaderships over")
def drain(client: Client, args: argparse.Namespace) -> Report:
    # the node waits up to --timeout seconds for the leaderships to move; the request, longer
    wait = client.timeout
    client.timeout = wait + 30.0
    return _drain_report(client.post("/api/maintenance/drain", {"timeout": wait}))


@COMMANDS.command("revive", "take the node out of maintenance: accept client connections and lead again")
def revive(client: Client, args: argparse.Namespace) -> Report:
    r = client.post("/api/maintenance/revive", {})
    return Report(r, f"Node {r['node']} is serving clients again")


@COMMANDS.command("maintenance_status", "whether the node is serving, draining or drained, and the drained members it knows")
def maintenance_status(client: Client, args: argparse.Namespace) -> Report:
    s = client.get("/api/maintenance")
    text = f"Node {s['node']}: {s['state']}; drained members known: {', '.join(s['drained_peers']) or '(none)'}"
    return Report(s, text)


@COMMANDS.command("rebalance", "move quorum-queue leaders so that the members lead evenly")
def rebalance(client: Client, args: argparse.Namespace) -> Listing:
    client.timeout = max(client.timeout, 120.0)
    rows = client.post("/api/rebalance/queues", {})
    return Listing(rows, ["vhost", "name", "from", "to", "ok", "error"], "Rebalancing quorum queue leaders ...",
                   "vhost name from to ok error")  # fmt: skip
