"""`warren ctl`'s commands on the node and its topology: status, connections,
vhosts, users, permissions, limits, connections, TLS reload, queues, policies
and topic permissions."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from node.ops.ctl_kit import (
    BINDING_COLUMNS,
    CONNECTION_COLUMNS,
    EX_DATAERR,
    EX_USAGE,
    EXCHANGE_COLUMNS,
    PERMISSION_COLUMNS,
    QUEUE_COLUMNS,
    USER_COLUMNS,
    VHOST_COLUMNS,
    Client,
    CommandTable,
    CtlError,
    Done,
    Listing,
    Report,
    _binding_row,
    _q,
)

EX_NOINPUT, EX_CANTCREAT = 66, 73  # sysexits.h, as the others in node/ops/ctl_kit.py

COMMANDS = CommandTable()


@COMMANDS.command("status", "node name, versions, uptime, listeners, alarms, object counts and workers")
def status(client: Client, args: argparse.Namespace) -> Any:
    overview = client.get("/api/overview")
    node = client.get("/api/nodes")[0]
    alarms = [name for name, on in (("memory", node["mem_alarm"]), ("disk", node["disk_free_alarm"])) if on]
    return {
        "node": overview["node"],
        "product_name": overview["product_name"],
        "product_version": overview["product_version"],
        "rabbitmq_version": overview["rabbitmq_version"],
        "uptime_seconds": node["uptime"] // 1000,
        "listeners": [{"protocol": x["protocol"], "port": x["port"]} for x in overview["listeners"]],
        "alarms": alarms,
        "mem_used": node["mem_used"],
        "mem_limit": node["mem_limit"],
        "disk_free": node["disk_free"],
        "disk_free_limit": node["disk_free_limit"],
        "object_totals": overview["object_totals"],
        "queue_totals": {k: v for k, v in overview["queue_totals"].items() if not k.endswith("_details")},
        **({"workers": node["workers"]} if "workers" in node else {}),  # a node of several worker processes
    }


@COMMANDS.command("list_connections", "open connections [columns: name user vhost protocol peer_host peer_port state ...]")
def list_connections(client: Client, args: argparse.Namespace) -> Listing:
    columns = args.columns or ["name", "user", "vhost", "protocol"]
    return Listing(client.get("/api/connections"), columns, "Listing connections ...", CONNECTION_COLUMNS)


@COMMANDS.command("list_queues", "queues of a vhost [columns: name messages consumers messages_ready ...]")
def list_queues(client: Client, args: argparse.Namespace) -> Listing:
    columns = args.columns or ["name", "messages", "consumers"]
    rows = client.get(f"/api/queues/{_q(args.vhost)}")
    return Listing(rows, columns, f"Listing queues for vhost {args.vhost} ...", QUEUE_COLUMNS)


@COMMANDS.command("list_exchanges", "exchanges of a vhost [columns: name type durable auto_delete internal arguments]")
def list_exchanges(client: Client, args: argparse.Namespace) -> Listing:
    columns = args.columns or ["name", "type"]
    rows = client.get(f"/api/exchanges/{_q(args.vhost)}")
    return Listing(rows, columns, f"Listing exchanges for vhost {args.vhost} ...", EXCHANGE_COLUMNS)


@COMMANDS.command("list_bindings", "bindings of a vhost [columns: source_name destination_name routing_key ...]")
def list_bindings(client: Client, args: argparse.Namespace) -> Listing:
    columns = args.columns or ["source_name", "source_kind", "destination_name", "destination_kind", "routing_key",
                               "arguments"]  # fmt: skip
    rows = [_binding_row(b) for b in client.get(f"/api/bindings/{_q(args.vhost)}")]
    return Listing(rows, columns, f"Listing bindings for vhost {args.vhost} ...", BINDING_COLUMNS)


@COMMANDS.command("list_vhosts", "virtual hosts [columns: name description tags messages]")
def list_vhosts(client: Client, args: argparse.Namespace) -> Listing:
    return Listing(client.get("/api/vhosts"), args.columns or ["name"], "Listing vhosts ...", VHOST_COLUMNS)


@COMMANDS.command("list_users", "users and their tags")
def list_users(client: Client, args: argparse.Namespace) -> Listing:
    return Listing(client.get("/api/users"), args.columns or ["name", "tags"], "Listing users ...", USER_COLUMNS)


@COMMANDS.command("list_permissions", "permissions in a vhost")
def list_permissions(client: Client, args: argparse.Namespace) -> Listing:
    rows = client.get(f"/api/vhosts/{_q(args.vhost)}/permissions")
    return Listing(rows, args.columns or ["user", "configure", "write", "read"],
                   f"Listing permissions for vhost {args.vhost} ...", PERMISSION_COLUMNS)  # fmt: skip


@COMMANDS.command("add_vhost", "NAME: create a virtual host")
def add_vhost(client: Client, args: argparse.Namespace) -> Done:
    client.put(f"/api/vhosts/{_q(args.name)}", {})
    return Done(f'Adding vhost "{args.name}" ...')


@COMMANDS.command("delete_vhost", "NAME: delete a virtual host, everything in it, and close its connections")
def delete_vhost(client: Client, args: argparse.Namespace) -> Done:
    client.delete(f"/api/vhosts/{_q(args.name)}")
    return Done(f'Deleting vhost "{args.name}" ...')


def _existing_user(client: Client, name: str) -> dict | None:
    try:
        return client.get(f"/api/users/{_q(name)}")
    except CtlError as e:
        if e.status == 404:
            return None
        raise


@COMMANDS.command("add_user", "NAME PASSWORD: create a user (no tags, no permissions)")
def add_user(client: Client, args: argparse.Namespace) -> Done:
    if _existing_user(client, args.name) is not None:
        raise CtlError(f"user '{args.name}' already exists", EX_DATAERR)
    client.put(f"/api/users/{_q(args.name)}", {"password": args.new_password, "tags": ""})
    return Done(f'Adding user "{args.name}" ...')


@COMMANDS.command("delete_user", "NAME: delete a user and its permissions")
def delete_user(client: Client, args: argparse.Namespace) -> Done:
    client.delete(f"/api/users/{_q(args.name)}")
    return Done(f'Deleting user "{args.name}" ...')


@COMMANDS.command("change_password", "NAME PASSWORD: set a user's password")
def change_password(client: Client, args: argparse.Namespace) -> Done:
    if _existing_user(client, args.name) is None:
        raise CtlError(f"no such user '{args.name}'", EX_DATAERR)
    client.put(f"/api/users/{_q(args.name)}", {"password": args.new_password})
    return Done(f'Changing password for user "{args.name}" ...')


@COMMANDS.command("set_user_tags", "NAME [TAG ...]: replace a user's tags (administrator, monitoring, management, ...)")
def set_user_tags(client: Client, args: argparse.Namespace) -> Done:
    if _existing_user(client, args.name) is None:
        raise CtlError(f"no such user '{args.name}'", EX_DATAERR)
    client.put(f"/api/users/{_q(args.name)}", {"tags": list(args.tags)})
    return Done(f'Setting tags for user "{args.name}" to [{", ".join(args.tags)}] ...')


@COMMANDS.command("set_permissions", "[-p VHOST] USER CONF WRITE READ: set a user's permissions in a vhost")
def set_permissions(client: Client, args: argparse.Namespace) -> Done:
    body = {"configure": args.conf, "write": args.write, "read": args.read}
    client.put(f"/api/permissions/{_q(args.vhost)}/{_q(args.username)}", body)
    return Done(f'Setting permissions for user "{args.username}" in vhost "{args.vhost}" ...')


@COMMANDS.command("clear_permissions", "[-p VHOST] USER: remove a user's permissions in a vhost")
def clear_permissions(client: Client, args: argparse.Namespace) -> Done:
    client.delete(f"/api/permissions/{_q(args.vhost)}/{_q(args.username)}")
    return Done(f'Clearing permissions for user "{args.username}" in vhost "{args.vhost}" ...')


def _limits_definition(text: str) -> dict[str, int]:
    """rabbitmqctl's definition argument: a JSON object of limit -> integer."""
    try:
        definition = json.loads(text)
    except ValueError as e:
        raise CtlError(f"the limit definition is not JSON: {e}", EX_USAGE) from None
    if not isinstance(definition, dict) or not definition:
        raise CtlError('the limit definition must be a JSON object such as {"max-connections": 64}', EX_USAGE)
    return definition


@COMMANDS.command("set_vhost_limits", '[-p VHOST] DEFINITION: set limits, e.g. \'{"max-connections": 64}\' (negative: none)')
def set_vhost_limits(client: Client, args: argparse.Namespace) -> Done:
    for name, value in _limits_definition(args.definition).items():
        client.put(f"/api/vhost-limits/{_q(args.vhost)}/{_q(name)}", {"value": value})
    return Done(f'Applying limits to vhost "{args.vhost}" ...')


@COMMANDS.command("clear_vhost_limits", "[-p VHOST]: remove every limit of a vhost")
def clear_vhost_limits(client: Client, args: argparse.Namespace) -> Done:
    for entry in client.get(f"/api/vhost-limits/{_q(args.vhost)}"):
        for name in entry["value"]:
            client.delete(f"/api/vhost-limits/{_q(args.vhost)}/{_q(name)}")
    return Done(f'Clearing limits for vhost "{args.vhost}" ...')


@COMMANDS.command("list_vhost_limits", "limits of every vhost")
def list_vhost_limits(client: Client, args: argparse.Namespace) -> Listing:
    rows = [{"vhost": e["vhost"], "limits": json.dumps(e["value"])} for e in client.get("/api/vhost-limits")]
    return Listing(rows, ["vhost", "limits"], "Listing limits for all vhosts ...", "vhost limits")


@COMMANDS.command("set_user_limits", 'USER DEFINITION: set limits, e.g. \'{"max-connections": 10}\' (negative: none)')
def set_user_limits(client: Client, args: argparse.Namespace) -> Done:
    for name, value in _limits_definition(args.definition).items():
        client.put(f"/api/user-limits/{_q(args.username)}/{_q(name)}", {"value": value})
    return Done(f'Setting user limits to "{args.definition}" for user "{args.username}" ...')


@COMMANDS.command("clear_user_limits", "USER LIMIT|all: remove one limit of a user, or all of them")
def clear_user_limits(client: Client, args: argparse.Namespace) -> Done:
    names = [args.limit]
    if args.limit == "all":
        names = [name for e in client.get(f"/api/user-limits/{_q(args.username)}") for name in e["value"]]
    for name in names:
        client.delete(f"/api/user-limits/{_q(args.username)}/{_q(name)}")
    return Done(f'Clearing "{args.limit}" limit for user "{args.username}" ...')


@COMMANDS.command("list_user_limits", "limits of every user")
def list_user_limits(client: Client, args: argparse.Namespace) -> Listing:
    rows = [{"user": e["user"], "limits": json.dumps(e["value"])} for e in client.get("/api/user-limits")]
    return Listing(rows, ["user", "limits"], "Listing limits for all users ...", "user limits")


@COMMANDS.command("close_connection", "NAME REASON: close a connection with amqp:connection:forced")
def close_connection(client: Client, args: argparse.Namespace) -> Done:
    client.delete(f"/api/connections/{_q(args.name)}", headers={"X-Reason": args.reason})
    return Done(f'Closing connection "{args.name}", reason: {args.reason} ...')


@COMMANDS.command("reload_tls", "read the node's TLS certificate, key and CA again (new connections use them)")
def reload_tls(client: Client, args: argparse.Namespace) -> Done:
    client.post("/api/tls/reload", None)
    return Done("Reloading the TLS certificate and key ...")


@COMMANDS.command("purge_queue", "[-p VHOST] NAME: drop a queue's ready messages")
def purge_queue(client: Client, args: argparse.Namespace) -> Done:
    client.delete(f"/api/queues/{_q(args.vhost)}/{_q(args.name)}/contents")
    return Done(f'Purging queue "{args.name}" in vhost "{args.vhost}" ...')


@COMMANDS.command("delete_queue", "[-p VHOST] NAME: delete a queue and its messages")
def delete_queue(client: Client, args: argparse.Namespace) -> Done:
    client.delete(f"/api/queues/{_q(args.vhost)}/{_q(args.name)}")
    return Done(f'Deleting queue "{args.name}" in vhost "{args.vhost}" ...')


POLICY_COLUMNS = "vhost name pattern apply-to definition priority"


def _policy_body(args: argparse.Namespace) -> dict:
    try:
        definition = json.loads(args.definition)
    except ValueError as e:
        raise CtlError(f"the definition is not JSON: {e}", EX_DATAERR) from None
    return {"pattern": args.pattern, "definition": definition, "priority": args.priority, "apply-to": args.apply_to}


def _policy_listing(client: Client, args: argparse.Namespace, kind: str, title: str) -> Listing:
    rows = client.get(f"/api/{kind}/{_q(args.vhost)}")
    return Listing(rows, args.columns or ["vhost", "name", "pattern", "apply-to", "definition", "priority"],
                   f"Listing {title} for vhost \"{args.vhost}\" ...", POLICY_COLUMNS)  # fmt: skip


@COMMANDS.command("set_policy", "[-p VHOST] [--priority N] [--apply-to WHAT] NAME PATTERN DEFINITION: set a policy")
def set_policy(client: Client, args: argparse.Namespace) -> Done:
    client.put(f"/api/policies/{_q(args.vhost)}/{_q(args.name)}", _policy_body(args))
    return Done(f'Setting policy "{args.name}" for pattern "{args.pattern}" to "{args.definition}" '
                f'with priority "{args.priority}" for vhost "{args.vhost}" ...')  # fmt: skip


@COMMANDS.command("clear_policy", "[-p VHOST] NAME: remove a policy")
def clear_policy(client: Client, args: argparse.Namespace) -> Done:
    client.delete(f"/api/policies/{_q(args.vhost)}/{_q(args.name)}")
    return Done(f'Clearing policy "{args.name}" on vhost "{args.vhost}" ...')


@COMMANDS.command("list_policies", "[-p VHOST]: the policies of a vhost")
def list_policies(client: Client, args: argparse.Namespace) -> Listing:
    return _policy_listing(client, args, "policies", "policies")


@COMMANDS.command("set_operator_policy", "[-p VHOST] [--priority N] [--apply-to WHAT] NAME PATTERN DEFINITION: "
                                "set an operator policy (limits that cap what queues declare)")  # fmt: skip
def set_operator_policy(client: Client, args: argparse.Namespace) -> Done:
    client.put(f"/api/operator-policies/{_q(args.vhost)}/{_q(args.name)}", _policy_body(args))
    return Done(f'Setting operator policy override "{args.name}" for pattern "{args.pattern}" to '
                f'"{args.definition}" with priority "{args.priority}" for vhost "{args.vhost}" ...')  # fmt: skip


@COMMANDS.command("clear_operator_policy", "[-p VHOST] NAME: remove an operator policy")
def clear_operator_policy(client: Client, args: argparse.Namespace) -> Done:
    client.delete(f"/api/operator-policies/{_q(args.vhost)}/{_q(args.name)}")
    return Done(f'Clearing operator policy "{args.name}" on vhost "{args.vhost}" ...')


@COMMANDS.command("list_operator_policies", "[-p VHOST]: the operator policies of a vhost")
def list_operator_policies(client: Client, args: argparse.Namespace) -> Listing:
    return _policy_listing(client, args, "operator-policies", "operator policy overrides")


TOPIC_PERMISSION_COLUMNS = "user vhost exchange write read"


@COMMANDS.command("set_topic_permissions", "[-p VHOST] USER EXCHANGE WRITE READ: patterns for a topic exchange's routing keys")
def set_topic_permissions(client: Client, args: argparse.Namespace) -> Done:
    body = {"exchange": args.exchange, "write": args.write, "read": args.read}
    client.put(f"/api/topic-permissions/{_q(args.vhost)}/{_q(args.username)}", body)
    return Done(f'Setting topic permissions on "{args.exchange}" for user "{args.username}" in vhost '
                f'"{args.vhost}" ...')  # fmt: skip


@COMMANDS.command("clear_topic_permissions", "[-p VHOST] USER [EXCHANGE]: remove a user's topic permissions")
def clear_topic_permissions(client: Client, args: argparse.Namespace) -> Done:
    query = f"?exchange={_q(args.exchange)}" if args.exchange else ""
    client.delete(f"/api/topic-permissions/{_q(args.vhost)}/{_q(args.username)}{query}")
    return Done(f'Clearing topic permissions for user "{args.username}" in vhost "{args.vhost}" ...')


@COMMANDS.command("list_topic_permissions", "[-p VHOST]: topic permissions in a vhost")
def list_topic_permissions(client: Client, args: argparse.Namespace) -> Listing:
    rows = client.get(f"/api/vhosts/{_q(args.vhost)}/topic-permissions")
    return Listing(rows, args.columns or ["user", "exchange", "write", "read"],
                   f"Listing topic permissions for vhost \"{args.vhost}\" ...", TOPIC_PERMISSION_COLUMNS)  # fmt: skip


@COMMANDS.command("export_definitions", "PATH|-: write the definitions (RabbitMQ's JSON) to a file, or to stdout with -")
def export_definitions(client: Client, args: argparse.Namespace) -> Done | Report:
    doc = client.get("/api/definitions")
    text = json.dumps(doc, indent=2)
    if args.path == "-":
        return Report(doc, text)
    try:
        with open(args.path, "w") as f:
            f.write(text + "\n")
    except OSError as e:
        raise CtlError(f"cannot write {args.path}: {e.strerror}", EX_CANTCREAT) from None
    return Done(f'Exported definitions for users, vhosts, permissions, parameters, policies, queues, exchanges and '
                f'bindings to "{args.path}"')  # fmt: skip


@COMMANDS.command("import_definitions", "PATH|-: import definitions (RabbitMQ's or Warren's JSON) from a file, or stdin with -")
def import_definitions(client: Client, args: argparse.Namespace) -> Done:
    try:
        if args.path == "-":
            doc = json.load(sys.stdin)
        else:
            with open(args.path) as f:
                doc = json.load(f)
    except OSError as e:
        raise CtlError(f"cannot read {args.path}: {e.strerror}", EX_NOINPUT) from None
    except ValueError as e:
        raise CtlError(f"{args.path} is not JSON: {e}", EX_DATAERR) from None
    client.post("/api/definitions", doc)
    return Done(f'Imported definitions from "{args.path}"')
