"""`warren ctl`'s commands on what runs: consumers, channels, runtime and
global parameters, the cluster name, closing every connection, a quorum
queue's Raft status, a stream's members, peeking at a message and the
node's memory, as rabbitmqctl's, rabbitmq-queues' and rabbitmq-diagnostics'."""

from __future__ import annotations

import argparse
import json
from typing import Any

from node.ops.ctl_kit import EX_DATAERR, Client, CommandTable, CtlError, Done, Listing, Report, _q

COMMANDS = CommandTable()


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        raise CtlError(f"the value must be JSON: {e}", EX_DATAERR) from None


@COMMANDS.command("list_consumers", "consumers of a vhost [columns: queue_name consumer_tag ack_required ...]")
def list_consumers(client: Client, args: argparse.Namespace) -> Listing:
    columns = args.columns or ["queue_name", "channel_pid", "consumer_tag", "ack_required", "prefetch_count",
                               "active", "activity_status", "arguments"]  # fmt: skip
    rows = [{**c, "queue_name": c["queue"]["name"], "channel_pid": c["channel_details"]["name"]}
            for c in client.get(f"/api/consumers/{_q(args.vhost)}")]  # fmt: skip
    return Listing(rows, columns, f"Listing consumers in vhost {args.vhost} ...",
                   "queue_name channel_pid consumer_tag ack_required prefetch_count active activity_status "
                   "arguments exclusive")  # fmt: skip


@COMMANDS.command("list_channels", "AMQP 0-9-1 channels: none on an AMQP 1.0 broker")
def list_channels(client: Client, args: argparse.Namespace) -> Listing:
    columns = args.columns or ["pid", "user", "consumer_count", "messages_unacknowledged"]
    return Listing(client.get("/api/channels"), columns, "Listing channels ...",
                   "pid user consumer_count messages_unacknowledged name number connection_details vhost")  # fmt: skip


@COMMANDS.command("list_parameters", "runtime parameters of a vhost (vhost-limits, operator_policy, shovel)")
def list_parameters(client: Client, args: argparse.Namespace) -> Listing:
    rows = [p for p in client.get("/api/parameters") if p["vhost"] == args.vhost]
    return Listing(rows, ["component", "name", "value"], f"Listing runtime parameters for vhost {args.vhost} ...",
                   "component name value vhost")  # fmt: skip


@COMMANDS.command("set_parameter", "set a runtime parameter: COMPONENT NAME VALUE (JSON)")
def set_parameter(client: Client, args: argparse.Namespace) -> Done:
    value = _json_value(args.value)
    client.put(f"/api/parameters/{_q(args.component)}/{_q(args.vhost)}/{_q(args.name)}", {"value": value})
    return Done(f'Setting runtime parameter "{args.name}" for component "{args.component}" to "{args.value}" '
                f'in vhost "{args.vhost}" ...')  # fmt: skip


@COMMANDS.command("clear_parameter", "clear a runtime parameter: COMPONENT NAME")
def clear_parameter(client: Client, args: argparse.Namespace) -> Done:
    client.delete(f"/api/parameters/{_q(args.component)}/{_q(args.vhost)}/{_q(args.name)}")
    return Done(
        f'Clearing runtime parameter "{args.name}" for component "{args.component}" on vhost "{args.vhost}" ...'
    )


@COMMANDS.command("shovel_status", "every dynamic shovel's status, wherever it runs (rabbitmqctl shovel_status)")
def shovel_status(client: Client, args: argparse.Namespace) -> Listing:
    rows = []
    for s in client.get("/api/shovels"):
        row = {"name": s["name"], "vhost": s["vhost"], "type": s["type"], "state": s["state"],
               "source_protocol": s.get("src_protocol", ""), "source": s.get("src_uri", ""),
               "destination_protocol": s.get("dest_protocol", ""), "destination": s.get("dest_uri", ""),
               "termination_reason": s.get("reason", "") if s["state"] == "terminated" else "",
               "last_changed": s["timestamp"], "node": s["node"], "forwarded": s.get("forwarded", 0),
               "remaining": s.get("remaining", "")}  # fmt: skip
        for old, new in (("src_address", "source_address"), ("src_queue", "source_queue"),
                         ("dest_address", "destination_address"), ("dest_queue", "destination_queue")):  # fmt: skip
            if old in s:
                row[new] = s[old]
        rows.append(row)
    columns = ["name", "vhost", "type", "state", "source_protocol", "source", "destination_protocol", "destination",
               "termination_reason", "last_changed"]  # fmt: skip
    return Listing(rows, columns, "Shovel status ...", " ".join(columns) + " node forwarded remaining")


@COMMANDS.command("list_global_parameters", "global runtime parameters")
def list_global_parameters(client: Client, args: argparse.Namespace) -> Listing:
    return Listing(client.get("/api/global-parameters"), ["name", "value"], "Listing global runtime parameters ...",
                   "name value")  # fmt: skip


@COMMANDS.command("set_global_parameter", "set a global runtime parameter: NAME VALUE (JSON)")
def set_global_parameter(client: Client, args: argparse.Namespace) -> Done:
    client.put(f"/api/global-parameters/{_q(args.name)}", {"value": _json_value(args.value)})
    return Done(f'Setting global runtime parameter "{args.name}" to "{args.value}" ...')


@COMMANDS.command("set_cluster_name", "the cluster's name, as /api/overview and Prometheus report it")
def set_cluster_name(client: Client, args: argparse.Namespace) -> Done:
    client.put("/api/cluster-name", {"name": args.name})
    return Done(f"Setting cluster name to {args.name} ...")


@COMMANDS.command("close_all_connections", "close the client connections of a vhost (--global: of every vhost)")
def close_all_connections(client: Client, args: argparse.Namespace) -> Done:
    path = "/api/connections" if args.all_vhosts else f"/api/vhosts/{_q(args.vhost)}/connections"
    names = [c["name"] for c in client.get(path)]
    if args.limit is not None:
        names = names[: args.limit]
    for name in names:
        try:
            client.delete(f"/api/connections/{_q(name)}", headers={"X-Reason": args.explanation})
        except CtlError as e:
            if e.status != 404:  # closed meanwhile
                raise
    where = "all vhosts" if args.all_vhosts else f"vhost {args.vhost}"
    return Done(f"Closing {len(names)} connection(s) in {where}, reason: {args.explanation} ...")


@COMMANDS.command("quorum_status", "the Raft status of a quorum queue's members")
def quorum_status(client: Client, args: argparse.Namespace) -> Listing:
    rows = client.get(f"/api/queues/quorum/{_q(args.vhost)}/{_q(args.name)}/status")
    columns = ["Node Name", "Raft State", "Membership", "Last Log Index", "Last Written", "Last Applied",
               "Commit Index", "Snapshot Index", "Term", "Machine Version"]  # fmt: skip
    return Listing(rows, columns, f"Status of quorum queue {args.name} on node ...", " ".join(columns))


@COMMANDS.command("stream_status", "a stream's members: which writes (its leader) and which replicate")
def stream_status(client: Client, args: argparse.Namespace) -> Listing:
    queue = client.get(f"/api/queues/{_q(args.vhost)}/{_q(args.name)}")
    if queue["type"] != "stream":
        raise CtlError(f"queue '{args.name}' in vhost '{args.vhost}' is not a stream", EX_DATAERR)
    rows = [{"role": "writer" if m == queue.get("leader") else "replica", "node": m, "epoch": queue.get("epoch")}
            for m in queue.get("members", [])]  # fmt: skip
    return Listing(rows, ["role", "node", "epoch"], f"Status of stream {args.name} ...", "role node epoch")


@COMMANDS.command("peek", "the message at POSITION (1 = the head) of a queue, left in place")
def peek(client: Client, args: argparse.Namespace) -> Report:
    if args.position < 1:
        raise CtlError("the position must be 1 or more", EX_DATAERR)
    body = {"count": args.position, "ackmode": "ack_requeue_true", "encoding": "auto", "truncate": 50000}
    messages = client.post(f"/api/queues/{_q(args.vhost)}/{_q(args.name)}/get", body)
    if len(messages) < args.position:
        raise CtlError(f"the queue holds {len(messages)} message(s), none at position {args.position}", EX_DATAERR)
    message = messages[args.position - 1]
    lines = [f"{key}: {json.dumps(message[key])}" for key in ("payload", "payload_encoding", "properties")
             if key in message]  # fmt: skip
    return Report(message, "\n".join(lines))


@COMMANDS.command("memory_breakdown", "what the node's memory holds, by category")
def memory_breakdown(client: Client, args: argparse.Namespace) -> Report:
    node = client.get("/api/overview")["node"]
    memory = client.get(f"/api/nodes/{_q(node)}/memory")["memory"]
    total = memory["total"]["allocated"] or 1
    parts = sorted(((k, v) for k, v in memory.items() if isinstance(v, int)), key=lambda kv: -kv[1])
    lines = [f"Reporting memory breakdown on node {node} ..."]
    lines += [f"{k}: {v / 1e9:.4f} gb ({v * 100 / total:.2f}%)" for k, v in parts]
    return Report(memory, "\n".join(lines))
