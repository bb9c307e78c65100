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
import json
import os
import sys
from typing import Any

from node.ops import ctl_cluster, ctl_diagnostics, ctl_maintenance, ctl_runtime, ctl_topology
from node.ops.ctl_kit import EX_USAGE, Client, Command, CtlError, Done, Listing, Report, table

# Every command, by module, in the order `warren ctl --help` lists them.
COMMANDS: dict[str, tuple[Command, str]] = {
    **ctl_cluster.COMMANDS,
    **ctl_maintenance.COMMANDS,
    **ctl_diagnostics.COMMANDS,
    **ctl_topology.COMMANDS,
    **ctl_runtime.COMMANDS,
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
    for w in s.get("workers", []):
        used = (f", pid {w['pid']}, {w['connections']} connections, {w['memory']} bytes, {w['cpu_seconds']} CPU s"
                if w["state"] == "running" else "")  # fmt: skip
        print(f"Worker {w['worker']}: {w['state']}, {w['classic_queues']} classic queues{used}")


# Positional arguments and options (a tuple of names: an option and its short
# form); their dests must differ from the common options' (host, port, user,
# password, json, timeout), which share one namespace.
_ARGS: dict[str, list[tuple[str | tuple[str, ...], dict]]] = {
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
    "export_definitions": [("path", {})],
    "import_definitions": [("path", {})],
    "list_consumers": [("columns", {"nargs": "*"})],
    "list_channels": [("columns", {"nargs": "*"})],
    "set_parameter": [("component", {}), ("name", {}), ("value", {})],
    "clear_parameter": [("component", {}), ("name", {})],
    "set_global_parameter": [("name", {}), ("value", {})],
    "set_cluster_name": [("name", {})],
    "close_all_connections": [("explanation", {}), ("--global", {"action": "store_true", "dest": "all_vhosts"}),
                              ("--limit", {"type": int, "default": None})],
    "quorum_status": [("name", {})],
    "stream_status": [("name", {})],
    "peek": [("name", {}), ("position", {"type": int})],
    "check_port_listener": [("listen_port", {"type": int, "metavar": "port"})],
    "check_protocol_listener": [("protocols", {"nargs": "+", "metavar": "protocol"})],
    "log_tail": [(("--number", "-N"), {"type": int, "default": 50})],
    "check_certificate_expiration": [("--within", {"type": int, "default": 4}),
                                     ("--unit", {"default": "weeks", "choices": ["days", "weeks", "months", "years"]})],
}
_VHOST_SCOPED = {"list_queues", "list_exchanges", "list_bindings", "list_permissions", "set_permissions",
                 "clear_permissions", "purge_queue", "delete_queue", "add_member", "delete_member", "set_vhost_limits",
                 "clear_vhost_limits", "set_policy", "clear_policy", "list_policies", "set_operator_policy",
                 "clear_operator_policy", "list_operator_policies", "set_topic_permissions", "clear_topic_permissions",
                 "list_topic_permissions", "list_consumers", "list_parameters", "set_parameter", "clear_parameter",
                 "close_all_connections", "quorum_status", "stream_status", "peek"}  # fmt: skip


# ---------------------------------------------------------------- entry point


def common_options() -> argparse.ArgumentParser:
    """The options that say which node and how (also `warren migrate`'s, for Warren)."""
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
    return common


def add_parser(sub: Any) -> None:
    """Registers `ctl` under the `warren` command."""
    common = common_options()
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
            p.add_argument(*((arg,) if isinstance(arg, str) else arg), **kw)


def settings(args: argparse.Namespace) -> None:
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
        settings(args)
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

