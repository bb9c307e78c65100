"""`warren ctl`: rabbitmqctl's everyday commands, over the node's management
HTTP API (node/http/api.py), so it needs nothing but the standard library.

    warren ctl [--host H] [--port 15672] [--user guest] [--password guest] [--json] COMMAND ...

Options also come from WARREN_CTL_HOST, WARREN_CTL_PORT, WARREN_CTL_USER and
WARREN_CTL_PASSWORD. Listings print aligned columns for people, or a JSON
list of objects with --json; a failure prints "Error: ..." on stderr and
exits non-zero with sysexits codes, as rabbitmqctl does (64 usage, 65 bad
input, 69 node unreachable, 70 internal, 77 refused).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

EX_USAGE, EX_DATAERR, EX_UNAVAILABLE, EX_SOFTWARE, EX_NOPERM = 64, 65, 69, 70, 77


class CtlError(Exception):
    def __init__(self, message: str, code: int, status: int | None = None):
        super().__init__(message)
        self.code = code
        self.status = status  # the HTTP status, when the node answered


def _q(name: str) -> str:
    return quote(name, safe="")


class Client:
    """A few lines of urllib: JSON in, JSON out, errors as CtlError."""

    def __init__(self, host: str, port: int, user: str, password: str, timeout: float = 30.0, cacert: str = ""):
        # with a CA file, HTTPS (the node's https_port) checked against it
        self.base = f"{'https' if cacert else 'http'}://{host}:{port}"
        self.tls = ssl.create_default_context(cafile=cacert) if cacert else None
        self.auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.timeout = timeout

    def request(self, method: str, path: str, body: Any = None, headers: dict | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", self.auth)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for key, value in (headers or {}).items():
            req.add_header(key, value)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self.tls) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raise self._error(e) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise CtlError(f"unable to connect to the node at {self.base}: {reason}", EX_UNAVAILABLE) from None
        return json.loads(raw) if raw.strip() else None

    def _error(self, e: urllib.error.HTTPError) -> CtlError:
        try:
            reason = json.loads(e.read()).get("reason") or e.reason
        except (ValueError, AttributeError):
            reason = e.reason
        code = {400: EX_DATAERR, 401: EX_NOPERM, 403: EX_NOPERM, 404: EX_DATAERR, 409: EX_DATAERR,
                503: EX_UNAVAILABLE}.get(e.code, EX_SOFTWARE)  # fmt: skip
        return CtlError(f"{reason} (HTTP {e.code})", code, e.code)

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def put(self, path: str, body: Any) -> Any:
        return self.request("PUT", path, body)

    def delete(self, path: str, headers: dict | None = None) -> Any:
        return self.request("DELETE", path, headers=headers)

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body)


# ---------------------------------------------------------------- output


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "[" + ", ".join(value) + "]"  # tags, as rabbitmqctl shows them
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def table(rows: list[dict], columns: list[str]) -> str:
    """Aligned columns under a header; the last column is not padded."""
    cells = [columns] + [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = []
    for r in cells:
        padded = [v.ljust(w) for v, w in zip(r[:-1], widths[:-1], strict=True)] + [r[-1]]
        lines.append("  ".join(padded).rstrip())
    return "\n".join(lines)


# rabbitmqctl's column names for bindings, and what they are in the HTTP API
_BINDING_COLUMNS = {"source_name": "source", "destination_name": "destination", "destination_kind": "destination_type"}


def _binding_row(b: dict) -> dict:
    row = dict(b)
    row["source_kind"] = "exchange"
    for ctl_name, api_name in _BINDING_COLUMNS.items():
        row[ctl_name] = b.get(api_name)
    return row


# ---------------------------------------------------------------- commands

COMMANDS: dict[str, tuple[Callable[[Client, argparse.Namespace], Any], str]] = {}


def command(name: str, help: str) -> Callable:
    def register(fn: Callable[[Client, argparse.Namespace], Any]) -> Callable:
        COMMANDS[name] = (fn, help)
        return fn

    return register


class Listing:
    """What a list_* command returns: rows, the columns to show, and the
    columns that exist (a column in no row and not known is an error, even
    when there are no rows, as in rabbitmqctl)."""

    def __init__(self, rows: list[dict], columns: list[str], title: str, known: str):
        self.rows, self.columns, self.title, self.known = rows, columns, title, known.split()

    def unknown_columns(self) -> list[str]:
        return [c for c in self.columns if c not in self.known and all(c not in row for row in self.rows)]


# The fields of the HTTP API's objects (node/http/formats.py), per listing.
CONNECTION_COLUMNS = ("name node type user vhost protocol host port peer_host peer_port channels state ssl peer_cert_subject "
                      "frame_max channel_max timeout client_properties")  # fmt: skip
QUEUE_COLUMNS = (
    "name vhost type durable auto_delete exclusive arguments node state messages messages_ready "
    "messages_unacknowledged message_bytes_ready consumers policy operator_policy effective_policy_definition "
    "exclusive_consumer_tag message_stats"
)
EXCHANGE_COLUMNS = "name vhost type durable auto_delete internal arguments"
BINDING_COLUMNS = ("source_name source_kind destination_name destination_kind routing_key arguments source vhost "
                   "destination destination_type properties_key")  # fmt: skip
VHOST_COLUMNS = ("name description tags default_queue_type metadata tracing cluster_state messages messages_ready "
                 "messages_unacknowledged")  # fmt: skip
USER_COLUMNS = "name tags password_hash hashing_algorithm limits"
PERMISSION_COLUMNS = "user vhost configure write read"


class Done:
    """What a command that changes something returns."""

    def __init__(self, message: str):
        self.message = message


@command("status", "node name, versions, uptime, listeners, alarms and object counts")
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
    }


def _print_status(s: dict) -> None:
    print(f"Status of node {s['node']} ...")
    print(f"{s['product_name']} {s['product_version']} (RabbitMQ {s['rabbitmq_version']} compatible)")
    print(f"Uptime: {s['uptime_seconds']} s")
    print("Listeners: " + ", ".join(f"{x['protocol']} on port {x['port']}" for x in s["listeners"]))
    print("Alarms: " + (", ".join(s["alarms"]) or "(none)"))
    print(f"Memory used: {s['mem_used']} bytes (limit {s['mem_limit']})")
    print(f"Disk free: {s['disk_free']} bytes (limit {s['disk_free_limit']})")
    print("Totals: " + ", ".join(f"{k}={v}" for k, v in {**s["object_totals"], **s["queue_totals"]}.items()))


@command("list_connections", "open connections [columns: name user vhost protocol peer_host peer_port state ...]")
def list_connections(client: Client, args: argparse.Namespace) -> Listing:
    columns = args.columns or ["name", "user", "vhost", "protocol"]
    return Listing(client.get("/api/connections"), columns, "Listing connections ...", CONNECTION_COLUMNS)


@command("list_queues", "queues of a vhost [columns: name messages consumers messages_ready ...]")
def list_queues(client: Client, args: argparse.Namespace) -> Listing:
    columns = args.columns or ["name", "messages", "consumers"]
    rows = client.get(f"/api/queues/{_q(args.vhost)}")
    return Listing(rows, columns, f"Listing queues for vhost {args.vhost} ...", QUEUE_COLUMNS)


@command("list_exchanges", "exchanges of a vhost [columns: name type durable auto_delete internal arguments]")
def list_exchanges(client: Client, args: argparse.Namespace) -> Listing:
    columns = args.columns or ["name", "type"]
    rows = client.get(f"/api/exchanges/{_q(args.vhost)}")
    return Listing(rows, columns, f"Listing exchanges for vhost {args.vhost} ...", EXCHANGE_COLUMNS)


@command("list_bindings", "bindings of a vhost [columns: source_name destination_name routing_key ...]")
def list_bindings(client: Client, args: argparse.Namespace) -> Listing:
    columns = args.columns or ["source_name", "source_kind", "destination_name", "destination_kind", "routing_key",
                               "arguments"]  # fmt: skip
    rows = [_binding_row(b) for b in client.get(f"/api/bindings/{_q(args.vhost)}")]
    return Listing(rows, columns, f"Listing bindings for vhost {args.vhost} ...", BINDING_COLUMNS)


@command("list_vhosts", "virtual hosts [columns: name description tags messages]")
def list_vhosts(client: Client, args: argparse.Namespace) -> Listing:
    return Listing(client.get("/api/vhosts"), args.columns or ["name"], "Listing vhosts ...", VHOST_COLUMNS)


@command("list_users", "users and their tags")
def list_users(client: Client, args: argparse.Namespace) -> Listing:
    return Listing(client.get("/api/users"), args.columns or ["name", "tags"], "Listing users ...", USER_COLUMNS)


@command("list_permissions", "permissions in a vhost")
def list_permissions(client: Client, args: argparse.Namespace) -> Listing:
    rows = client.get(f"/api/vhosts/{_q(args.vhost)}/permissions")
    return Listing(rows, args.columns or ["user", "configure", "write", "read"],
                   f"Listing permissions for vhost {args.vhost} ...", PERMISSION_COLUMNS)  # fmt: skip


@command("add_vhost", "NAME: create a virtual host")
def add_vhost(client: Client, args: argparse.Namespace) -> Done:
    client.put(f"/api/vhosts/{_q(args.name)}", {})
    return Done(f'Adding vhost "{args.name}" ...')


@command("delete_vhost", "NAME: delete a virtual host, everything in it, and close its connections")
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


@command("add_user", "NAME PASSWORD: create a user (no tags, no permissions)")
def add_user(client: Client, args: argparse.Namespace) -> Done:
    if _existing_user(client, args.name) is not None:
        raise CtlError(f"user '{args.name}' already exists", EX_DATAERR)
    client.put(f"/api/users/{_q(args.name)}", {"password": args.new_password, "tags": ""})
    return Done(f'Adding user "{args.name}" ...')


@command("delete_user", "NAME: delete a user and its permissions")
def delete_user(client: Client, args: argparse.Namespace) -> Done:
    client.delete(f"/api/users/{_q(args.name)}")
    return Done(f'Deleting user "{args.name}" ...')


@command("change_password", "NAME PASSWORD: set a user's password")
def change_password(client: Client, args: argparse.Namespace) -> Done:
    if _existing_user(client, args.name) is None:
        raise CtlError(f"no such user '{args.name}'", EX_DATAERR)
    client.put(f"/api/users/{_q(args.name)}", {"password": args.new_password})
    return Done(f'Changing password for user "{args.name}" ...')


@command("set_user_tags", "NAME [TAG ...]: replace a user's tags (administrator, monitoring, management, ...)")
def set_user_tags(client: Client, args: argparse.Namespace) -> Done:
    if _existing_user(client, args.name) is None:
        raise CtlError(f"no such user '{args.name}'", EX_DATAERR)
    client.put(f"/api/users/{_q(args.name)}", {"tags": list(args.tags)})
    return Done(f'Setting tags for user "{args.name}" to [{", ".join(args.tags)}] ...')


@command("set_permissions", "[-p VHOST] USER CONF WRITE READ: set a user's permissions in a vhost")
def set_permissions(client: Client, args: argparse.Namespace) -> Done:
    body = {"configure": args.conf, "write": args.write, "read": args.read}
    client.put(f"/api/permissions/{_q(args.vhost)}/{_q(args.username)}", body)
    return Done(f'Setting permissions for user "{args.username}" in vhost "{args.vhost}" ...')


@command("clear_permissions", "[-p VHOST] USER: remove a user's permissions in a vhost")
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


@command("set_vhost_limits", '[-p VHOST] DEFINITION: set limits, e.g. \'{"max-connections": 64}\' (negative: none)')
def set_vhost_limits(client: Client, args: argparse.Namespace) -> Done:
    for name, value in _limits_definition(args.definition).items():
        client.put(f"/api/vhost-limits/{_q(args.vhost)}/{_q(name)}", {"value": value})
    return Done(f'Applying limits to vhost "{args.vhost}" ...')


@command("clear_vhost_limits", "[-p VHOST]: remove every limit of a vhost")
def clear_vhost_limits(client: Client, args: argparse.Namespace) -> Done:
    for entry in client.get(f"/api/vhost-limits/{_q(args.vhost)}"):
        for name in entry["value"]:
            client.delete(f"/api/vhost-limits/{_q(args.vhost)}/{_q(name)}")
    return Done(f'Clearing limits for vhost "{args.vhost}" ...')


@command("list_vhost_limits", "limits of every vhost")
def list_vhost_limits(client: Client, args: argparse.Namespace) -> Listing:
    rows = [{"vhost": e["vhost"], "limits": json.dumps(e["value"])} for e in client.get("/api/vhost-limits")]
    return Listing(rows, ["vhost", "limits"], "Listing limits for all vhosts ...", "vhost limits")


@command("set_user_limits", 'USER DEFINITION: set limits, e.g. \'{"max-connections": 10}\' (negative: none)')
def set_user_limits(client: Client, args: argparse.Namespace) -> Done:
    for name, value in _limits_definition(args.definition).items():
        client.put(f"/api/user-limits/{_q(args.username)}/{_q(name)}", {"value": value})
    return Done(f'Setting user limits to "{args.definition}" for user "{args.username}" ...')


@command("clear_user_limits", "USER LIMIT|all: remove one limit of a user, or all of them")
def clear_user_limits(client: Client, args: argparse.Namespace) -> Done:
    names = [args.limit]
    if args.limit == "all":
        names = [name for e in client.get(f"/api/user-limits/{_q(args.username)}") for name in e["value"]]
    for name in names:
        client.delete(f"/api/user-limits/{_q(args.username)}/{_q(name)}")
    return Done(f'Clearing "{args.limit}" limit for user "{args.username}" ...')


@command("list_user_limits", "limits of every user")
def list_user_limits(client: Client, args: argparse.Namespace) -> Listing:
    rows = [{"user": e["user"], "limits": json.dumps(e["value"])} for e in client.get("/api/user-limits")]
    return Listing(rows, ["user", "limits"], "Listing limits for all users ...", "user limits")


@command("close_connection", "NAME REASON: close a connection with amqp:connection:forced")
def close_connection(client: Client, args: argparse.Namespace) -> Done:
    client.delete(f"/api/connections/{_q(args.name)}", headers={"X-Reason": args.reason})
    return Done(f'Closing connection "{args.name}", reason: {args.reason} ...')


@command("reload_tls", "read the node's TLS certificate, key and CA again (new connections use them)")
def reload_tls(client: Client, args: argparse.Namespace) -> Done:
    client.post("/api/tls/reload", None)
    return Done("Reloading the TLS certificate and key ...")


@command("purge_queue", "[-p VHOST] NAME: drop a queue's ready messages")
def purge_queue(client: Client, args: argparse.Namespace) -> Done:
    client.delete(f"/api/queues/{_q(args.vhost)}/{_q(args.name)}/contents")
    return Done(f'Purging queue "{args.name}" in vhost "{args.vhost}" ...')


@command("delete_queue", "[-p VHOST] NAME: delete a queue and its messages")
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


@command("set_policy", "[-p VHOST] [--priority N] [--apply-to WHAT] NAME PATTERN DEFINITION: set a policy")
def set_policy(client: Client, args: argparse.Namespace) -> Done:
    client.put(f"/api/policies/{_q(args.vhost)}/{_q(args.name)}", _policy_body(args))
    return Done(f'Setting policy "{args.name}" for pattern "{args.pattern}" to "{args.definition}" '
                f'with priority "{args.priority}" for vhost "{args.vhost}" ...')  # fmt: skip


@command("clear_policy", "[-p VHOST] NAME: remove a policy")
def clear_policy(client: Client, args: argparse.Namespace) -> Done:
    client.delete(f"/api/policies/{_q(args.vhost)}/{_q(args.name)}")
    return Done(f'Clearing policy "{args.name}" on vhost "{args.vhost}" ...')


@command("list_policies", "[-p VHOST]: the policies of a vhost")
def list_policies(client: Client, args: argparse.Namespace) -> Listing:
    return _policy_listing(client, args, "policies", "policies")


@command("set_operator_policy", "[-p VHOST] [--priority N] [--apply-to WHAT] NAME PATTERN DEFINITION: "
                                "set an operator policy (limits that cap what queues declare)")  # fmt: skip
def set_operator_policy(client: Client, args: argparse.Namespace) -> Done:
    client.put(f"/api/operator-policies/{_q(args.vhost)}/{_q(args.name)}", _policy_body(args))
    return Done(f'Setting operator policy override "{args.name}" for pattern "{args.pattern}" to '
                f'"{args.definition}" with priority "{args.priority}" for vhost "{args.vhost}" ...')  # fmt: skip


@command("clear_operator_policy", "[-p VHOST] NAME: remove an operator policy")
def clear_operator_policy(client: Client, args: argparse.Namespace) -> Done:
    client.delete(f"/api/operator-policies/{_q(args.vhost)}/{_q(args.name)}")
    return Done(f'Clearing operator policy "{args.name}" on vhost "{args.vhost}" ...')


@command("list_operator_policies", "[-p VHOST]: the operator policies of a vhost")
def list_operator_policies(client: Client, args: argparse.Namespace) -> Listing:
    return _policy_listing(client, args, "operator-policies", "operator policy overrides")


TOPIC_PERMISSION_COLUMNS = "user vhost exchange write read"


@command("set_topic_permissions", "[-p VHOST] USER EXCHANGE WRITE READ: patterns for a topic exchange's routing keys")
def set_topic_permissions(client: Client, args: argparse.Namespace) -> Done:
    body = {"exchange": args.exchange, "write": args.write, "read": args.read}
    client.put(f"/api/topic-permissions/{_q(args.vhost)}/{_q(args.username)}", body)
    return Done(f'Setting topic permissions on "{args.exchange}" for user "{args.username}" in vhost '
                f'"{args.vhost}" ...')  # fmt: skip


@command("clear_topic_permissions", "[-p VHOST] USER [EXCHANGE]: remove a user's topic permissions")
def clear_topic_permissions(client: Client, args: argparse.Namespace) -> Done:
    query = f"?exchange={_q(args.exchange)}" if args.exchange else ""
    client.delete(f"/api/topic-permissions/{_q(args.vhost)}/{_q(args.username)}{query}")
    return Done(f'Clearing topic permissions for user "{args.username}" in vhost "{args.vhost}" ...')


@command("list_topic_permissions", "[-p VHOST]: topic permissions in a vhost")
def list_topic_permissions(client: Client, args: argparse.Namespace) -> Listing:
    rows = client.get(f"/api/vhosts/{_q(args.vhost)}/topic-permissions")
    return Listing(rows, args.columns or ["user", "exchange", "write", "read"],
                   f"Listing topic permissions for vhost \"{args.vhost}\" ...", TOPIC_PERMISSION_COLUMNS)  # fmt: skip


class Report:
    """What a command that shows one object returns: its JSON, and how people read it."""

    def __init__(self, data: Any, text: str):
        self.data, self.text = data, text


def _cluster_report(s: dict) -> Report:
    lines = [f"Cluster status of node {s.get('node_name', s['node'])} ({s['node']}) ..."]
    if s.get("failed"):
        lines.append(f"FAILED: {s['failed']}")
    lines.append(f"Role: {s['role']}, term {s.get('term')}, leader {s.get('leader') or '(none)'}")
    lines.append(f"Commit index: {s.get('commit_index')}, last applied: {s.get('last_applied')}")
    lines.append(f"Members ({s.get('reachable')} of {len(s['members'])} reachable,"
                 f" {'majority' if s.get('majority') else 'NO majority'}):")  # fmt: skip
    rows = [{"node": m["node"], "role": "leader" if m["leader"] else "follower", "reachable": m["reachable"],
             "this_node": m["self"]} for m in s["members"]]  # fmt: skip
    lines.append(table(rows, ["node", "role", "reachable", "this_node"]))
    return Report(s, "\n".join(lines))


@command("cluster_status", "this node's view of the cluster: leader, term, members and their reachability")
def cluster_status(client: Client, args: argparse.Namespace) -> Report:
    return _cluster_report(client.get("/api/cluster"))


@command("join_cluster", "SEED: reset this node and join the cluster of SEED (its cluster address host:port)")
def join_cluster(client: Client, args: argparse.Namespace) -> Done:
    client.post("/api/cluster/join", {"seed": args.seed})
    return Done(f"Clustering node with {args.seed} ...")


@command("forget_cluster_node", "NODE: remove a stopped member (its cluster address host:port) from the cluster")
def forget_cluster_node(client: Client, args: argparse.Namespace) -> Done:
    client.post("/api/cluster/forget", {"node": args.node})
    return Done(f"Removing node {args.node} from the cluster ...")


@command("list_feature_flags", "feature flags: name, state (enabled, disabled, unavailable), stability")
def list_feature_flags(client: Client, args: argparse.Namespace) -> Listing:
    rows = [{**f, "unsupported_by": ",".join(f.get("unsupported_by", []))} for f in client.get("/api/feature_flags")]
    return Listing(rows, args.columns or ["name", "state", "stability", "unsupported_by"],
                   "Listing feature flags ...", "name desc stability introduced_in depends_on state unsupported_by")


@command("enable_feature_flag", "NAME|all: enable a feature flag (all: every stable flag every member supports)")
def enable_feature_flag(client: Client, args: argparse.Namespace) -> Done:
    client.put(f"/api/feature_flags/{_q(args.name)}/enable", {})
    return Done(f'Enabling feature flag "{args.name}" ...')


@command("add_member", "[-p VHOST] QUEUE NODE: add a replica (a member's cluster address) to a quorum queue")
def add_member(client: Client, args: argparse.Namespace) -> Done:
    client.post(f"/api/quorum-queues/{_q(args.vhost)}/{_q(args.name)}/members", {"node": args.node})
    return Done(f'Adding a replica for queue "{args.name}" on node {args.node} ...')


@command("delete_member", "[-p VHOST] QUEUE NODE: remove a replica from a quorum queue")
def delete_member(client: Client, args: argparse.Namespace) -> Done:
    client.delete(f"/api/quorum-queues/{_q(args.vhost)}/{_q(args.name)}/members/{_q(args.node)}")
    return Done(f'Removing the replica of queue "{args.name}" on node {args.node} ...')


def _each_queue(client: Client, op: str, node: str) -> Listing:
    rows = [{**r, "members": ",".join(r.get("members", [])), "error": r.get("error", "")}
            for r in client.post(f"/api/quorum-queues/{op}", {"node": node})]  # fmt: skip
    return Listing(rows, ["vhost", "name", "ok", "members", "error"], f"{op.capitalize()} quorum queues ...",
                   "vhost name ok members error")  # fmt: skip


@command("grow", "NODE: add NODE as a replica of every quorum queue that lacks it")
def grow(client: Client, args: argparse.Namespace) -> Listing:
    return _each_queue(client, "grow", args.node)


@command("shrink", "NODE: remove NODE's replica from every quorum queue")
def shrink(client: Client, args: argparse.Namespace) -> Listing:
    return _each_queue(client, "shrink", args.node)


@command("export_snapshots", "DIR: copy every member's cluster-state snapshot files into DIR/<member>/ (for warren audit)")
def export_snapshots(client: Client, args: argparse.Namespace) -> Done:
    copied = 0
    for entry in client.get("/api/snapshots"):
        member = entry["node"]
        if "error" in entry:
            print(f"warning: {member}: {entry['error']}", file=sys.stderr)
            continue
        target = os.path.join(args.directory, member.replace(":", "_").replace("/", "_"))
        os.makedirs(target, exist_ok=True)
        for f in entry["files"]:
            with open(os.path.join(target, f["name"]), "wb") as out:
                offset = 0
                while True:
                    chunk = client.get(f"/api/snapshots/{_q(member)}/{_q(f['name'])}?offset={offset}")
                    data = base64.b64decode(chunk["data"])
                    out.write(data)
                    offset += len(data)
                    if chunk["eof"]:
                        break
            copied += 1
    return Done(f"Exported {copied} snapshot files to {args.directory}")


# Positional arguments; their dests must differ from the options' (host,
# port, user, password, json, timeout), which share one namespace.
_ARGS: dict[str, list[tuple[str, dict]]] = {
    "list_connections": [("columns", {"nargs": "*"})],
    "list_queues": [("columns", {"nargs": "*"})],
    "list_exchanges": [("columns", {"nargs": "*"})],
    "list_bindings": [("columns", {"nargs": "*"})],
    "list_vhosts": [("columns", {"nargs": "*"})],
    "list_users": [("columns", {"nargs": "*"})],
    "list_permissions": [("columns", {"nargs": "*"})],
    "add_vhost": [("name", {})],
    "delete_vhost": [("name", {})],
    "add_user": [("name", {}), ("new_password", {"metavar": "password"})],
    "delete_user": [("name", {})],
    "change_password": [("name", {}), ("new_password", {"metavar": "password"})],
    "set_user_tags": [("name", {}), ("tags", {"nargs": "*"})],
    "set_permissions": [("username", {"metavar": "user"}), ("conf", {}), ("write", {}), ("read", {})],
    "clear_permissions": [("username", {"metavar": "user"})],
    "close_connection": [("name", {}), ("reason", {})],
    "set_vhost_limits": [("definition", {})],
    "set_user_limits": [("username", {"metavar": "user"}), ("definition", {})],
    "clear_user_limits": [("username", {"metavar": "user"}), ("limit", {})],
    "purge_queue": [("name", {})],
    "delete_queue": [("name", {})],
    "join_cluster": [("seed", {})],
    "forget_cluster_node": [("node", {})],
    "list_feature_flags": [("columns", {"nargs": "*"})],
    "enable_feature_flag": [("name", {})],
    "add_member": [("name", {}), ("node", {})],
    "delete_member": [("name", {}), ("node", {})],
    "grow": [("node", {})],
    "export_snapshots": [("directory", {})],
    "shrink": [("node", {})],
    **{name: [("name", {}), ("pattern", {}), ("definition", {}),
              ("--priority", {"type": int, "default": 0}), ("--apply-to", {"default": "all"})]
       for name in ("set_policy", "set_operator_policy")},
    "clear_policy": [("name", {})],
    "set_topic_permissions": [("username", {"metavar": "user"}), ("exchange", {}), ("write", {}), ("read", {})],
    "clear_topic_permissions": [("username", {"metavar": "user"}), ("exchange", {"nargs": "?", "default": ""})],
    "list_topic_permissions": [("columns", {"nargs": "*"})],
    "clear_operator_policy": [("name", {})],
    "list_policies": [("columns", {"nargs": "*"})],
    "list_operator_policies": [("columns", {"nargs": "*"})],
}
_VHOST_SCOPED = {"list_queues", "list_exchanges", "list_bindings", "list_permissions", "set_permissions",
                 "clear_permissions", "purge_queue", "delete_queue", "add_member", "delete_member", "set_vhost_limits",
                 "clear_vhost_limits", "set_policy", "clear_policy", "list_policies", "set_operator_policy",
                 "clear_operator_policy", "list_operator_policies", "set_topic_permissions", "clear_topic_permissions",
                 "list_topic_permissions"}  # fmt: skip


# ---------------------------------------------------------------- entry point


def add_parser(sub: Any) -> None:
    """Registers `ctl` under the `warren` command."""
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: an option given after the command keeps, and one given
    # before it is not overwritten by, the other parser's default.
    common.add_argument("--host", default=argparse.SUPPRESS, help="node host (WARREN_CTL_HOST, localhost)")
    common.add_argument("--port", type=int, default=argparse.SUPPRESS, help="HTTP API port (WARREN_CTL_PORT, 15672)")
    common.add_argument("--user", default=argparse.SUPPRESS, help="user (WARREN_CTL_USER, guest)")
    common.add_argument("--password", default=argparse.SUPPRESS, help="password (WARREN_CTL_PASSWORD, guest)")
    common.add_argument("--cacert", default=argparse.SUPPRESS,
                        help="HTTPS: the CA file that signed the node's certificate (WARREN_CTL_CACERT)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="JSON output for scripts")
    common.add_argument("--timeout", type=float, default=argparse.SUPPRESS, help="seconds per request (30)")
    ctl = sub.add_parser("ctl", parents=[common], help="manage a running node (like rabbitmqctl)",
                         description="Manage a running node through its management HTTP API.")  # fmt: skip
    # Not set_defaults(host=...): it would also set the default of the
    # shared option objects of the command parsers, which then overwrite an
    # option given before the command. main() fills in what is missing.
    ctl.set_defaults(func=main)
    commands = ctl.add_subparsers(dest="ctl_command", required=True, metavar="COMMAND")
    for name, (_, help) in COMMANDS.items():
        p = commands.add_parser(name, parents=[common], help=help, description=help)
        if name in _VHOST_SCOPED:
            p.add_argument("-p", "--vhost", default="/", help="virtual host (default /)")
        for arg, kw in _ARGS.get(name, []):
            p.add_argument(arg, **kw)


def _settings(args: argparse.Namespace) -> None:
    """Options not given come from WARREN_CTL_* or the defaults."""
    env = os.environ
    defaults = {"host": env.get("WARREN_CTL_HOST", "localhost"), "port": env.get("WARREN_CTL_PORT", "15672"),
                "user": env.get("WARREN_CTL_USER", "guest"), "password": env.get("WARREN_CTL_PASSWORD", "guest"),
                "cacert": env.get("WARREN_CTL_CACERT", ""), "json": False, "timeout": 30.0}  # fmt: skip
    for name, value in defaults.items():
        if not hasattr(args, name):
            setattr(args, name, value)
    try:
        args.port = int(args.port)
    except ValueError:
        raise CtlError(f"invalid port {args.port!r}", EX_USAGE) from None


def main(args: argparse.Namespace) -> int:
    try:
        _settings(args)
    except CtlError as e:
        print(f"Error: {e}", file=sys.stderr)
        return e.code
    client = Client(args.host, args.port, args.user, args.password, args.timeout, args.cacert)
    fn, _ = COMMANDS[args.ctl_command]
    try:
        result = fn(client, args)
    except CtlError as e:
        print(f"Error: {e}", file=sys.stderr)
        return e.code
    if isinstance(result, Listing):
        unknown = result.unknown_columns()
        if unknown:
            print(f"Error: unknown column(s): {', '.join(unknown)}", file=sys.stderr)
            return EX_USAGE
        rows = [{c: row.get(c) for c in result.columns} for row in result.rows]
        if args.json:
            print(json.dumps(rows, indent=1))
        else:
            print(result.title)
            print(table(rows, result.columns))
    elif isinstance(result, Done):
        print(json.dumps({"ok": True}) if args.json else result.message)
    elif isinstance(result, Report):
        print(json.dumps(result.data, indent=1) if args.json else result.text)
    elif args.json:
        print(json.dumps(result, indent=1))
    else:
        _print_status(result)
    return 0
