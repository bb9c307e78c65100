"""`warren ctl`'s health checks, as rabbitmq-diagnostics' and rabbitmq-upgrade's:
each calls one of the node's /api/health/checks (node/http/health_routes.py)
and exits 0 when it passes; a failed check exits 69 (EX_UNAVAILABLE) with the
node's reason, as those tools do."""

from __future__ import annotations

import argparse
import socket
import time
from urllib.parse import quote

from node.ops.ctl_kit import EX_UNAVAILABLE, Client, CommandTable, CtlError, Done, Listing, Report

COMMANDS = CommandTable()
CHECKS = "/api/health/checks"


def _check(client: Client, path: str) -> dict:
    return client.get(f"{CHECKS}/{path}")


@COMMANDS.command("ping", "whether the node answers")
def ping(client: Client, args: argparse.Namespace) -> Done:
    node = client.get("/api/overview")["node"]
    return Done(f"Ping succeeded for node {node}")


@COMMANDS.command("check_running", "whether the node runs: its metadata caught up, serving its API")
def check_running(client: Client, args: argparse.Namespace) -> Done:
    _check(client, "metadata-store/initialized")
    return Done("The node is fully booted and running")


@COMMANDS.command("check_alarms", "fails when a resource alarm is in effect anywhere in the cluster")
def check_alarms(client: Client, args: argparse.Namespace) -> Done:
    _check(client, "alarms")
    return Done("Node reported no alarms, local or clusterwide")


@COMMANDS.command("check_local_alarms", "fails when a resource alarm is in effect on this node")
def check_local_alarms(client: Client, args: argparse.Namespace) -> Done:
    _check(client, "local-alarms")
    return Done("Node reported no local alarms")


@COMMANDS.command("check_virtual_hosts", "fails when a virtual host is down on the node")
def check_virtual_hosts(client: Client, args: argparse.Namespace) -> Done:
    _check(client, "virtual-hosts")
    return Done("Node reported all virtual hosts as running")


@COMMANDS.command("check_port_listener", "fails when the node does not listen on the port")
def check_port_listener(client: Client, args: argparse.Namespace) -> Done:
    _check(client, f"port-listener/{args.listen_port}")
    return Done(f"A listener for port {args.listen_port} is running")


@COMMANDS.command("check_protocol_listener", "fails when the node does not listen for the protocol(s)")
def check_protocol_listener(client: Client, args: argparse.Namespace) -> Done:
    _check(client, f"protocol-listener/{quote(','.join(args.protocols), safe=',')}")
    return Done(f"A listener for protocol(s) {', '.join(args.protocols)} is running")


@COMMANDS.command("check_port_connectivity", "opens a TCP connection to each of the node's listeners")
def check_port_connectivity(client: Client, args: argparse.Namespace) -> Done:
    listeners = client.get("/api/overview")["listeners"]
    host = client.base.split("://", 1)[1].rsplit(":", 1)[0]
    failed = []
    for x in listeners:
        try:
            socket.create_connection((host, x["port"]), timeout=client.timeout).close()
        except OSError as e:
            failed.append(f"{x['protocol']} on port {x['port']}: {e}")
    if failed:
        raise CtlError("connection to listener(s) failed: " + "; ".join(failed), EX_UNAVAILABLE)
    return Done(f"Successfully connected to ports {', '.join(str(x['port']) for x in listeners)}")


@COMMANDS.command(
    "check_certificate_expiration", "fails when a TLS listener's certificate expires within --within --unit"
)
def check_certificate_expiration(client: Client, args: argparse.Namespace) -> Done:
    _check(client, f"certificate-expiration/{args.within}/{quote(args.unit, safe='')}")
    return Done(f"No certificates are expiring within {args.within} {args.unit}")


@COMMANDS.command("check_if_node_is_quorum_critical",
                  "fails when stopping the node would leave a quorum queue without a majority")  # fmt: skip
def check_if_node_is_quorum_critical(client: Client, args: argparse.Namespace) -> Done:
    _check(client, "node-is-quorum-critical")
    return Done("Node is not critical for any quorum queue")


@COMMANDS.command("check_is_in_service", "fails while the node is in maintenance (drained)")
def check_is_in_service(client: Client, args: argparse.Namespace) -> Done:
    _check(client, "is-in-service")
    return Done("Node is in service")


@COMMANDS.command("await_online_quorum_plus_one",
                  "waits (up to --timeout) until no quorum queue depends on the node for its majority")  # fmt: skip
def await_online_quorum_plus_one(client: Client, args: argparse.Namespace) -> Done:
    deadline = time.monotonic() + client.timeout
    while True:
        try:
            _check(client, "node-is-quorum-critical")
            return Done("Online quorum + 1 reached for every quorum queue")
        except CtlError as e:
            if e.status != 503 or time.monotonic() >= deadline:
                raise
        time.sleep(1.0)


@COMMANDS.command("listeners", "the node's listeners: protocol, address and port")
def listeners(client: Client, args: argparse.Namespace) -> Listing:
    rows = client.get("/api/overview")["listeners"]
    return Listing(rows, ["node", "protocol", "ip_address", "port"], "Listeners of the node ...",
                   "node protocol ip_address port")  # fmt: skip


@COMMANDS.command("log_tail", "the node's last log lines (--number N, default 50): its log file, else its console's")
def log_tail(client: Client, args: argparse.Namespace) -> Report:
    node = client.get("/api/overview")["node"]
    lines = client.get(f"/api/nodes/{quote(node, safe='')}/log-tail?lines={args.number}")["lines"]
    return Report(lines, "\n".join([f"Last {args.number} log lines on node {node} ...", *lines]))
