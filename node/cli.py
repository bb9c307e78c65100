"""The `warren` command: `warren server` runs a node, `warren ctl` manages one,
`warren migrate` moves a RabbitMQ into one."""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields

from audit import cli as audit_cli

from . import __version__, config
from .ops import ctl, migrate

SETTING_PREFIX = "setting_"  # argparse dest of the flags made from Config's fields


def _server(args: argparse.Namespace) -> int:
    from .start import run

    return run(server_config(args))


def server_config(args: argparse.Namespace) -> config.Config:
    """The settings: defaults, then the TOML file, WARREN_* variables, flags."""
    explicit = {
        "node_name": args.node_name,
        "data_dir": args.data_dir,
        "listen_host": args.listen_host,
        "amqp_port": args.amqp_port,
        "http_port": args.http_port,
        "metrics_port": args.metrics_port,
        "grpc_port": args.grpc_port,
        "definitions_file": args.definitions,
        "seeds": [s.strip() for s in args.seeds.split(",") if s.strip()] if args.seeds is not None else None,
        "seeds_dns": args.seeds_dns,
        "cluster_secret": args.cluster_secret,
        "advertise_host": args.advertise_host,
        "cluster_tls_cert": args.cluster_tls_cert,
        "cluster_tls_key": args.cluster_tls_key,
        "cluster_tls_ca": args.cluster_tls_ca,
        "enable_test_faults": args.enable_test_faults,
    }
    overrides = setting_flags(args) | {k: v for k, v in explicit.items() if v is not None}
    return config.load(args.config, overrides=overrides)


def add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """Every Config field without a flag of its own becomes --its-name-with-dashes
    (a boolean gets --name / --no-name; a list is comma-separated)."""
    defaults = config.Config()
    for f in fields(config.Config):
        flag = "--" + f.name.replace("_", "-")
        if flag in parser._option_string_actions:
            continue
        default = getattr(defaults, f.name)
        if isinstance(default, bool):
            parser.add_argument(flag, dest=SETTING_PREFIX + f.name, action=argparse.BooleanOptionalAction,
                                default=None, help=f"setting {f.name} (default {default})")  # fmt: skip
        else:
            parser.add_argument(flag, dest=SETTING_PREFIX + f.name, default=None, metavar=type(default).__name__.upper(),
                                help=f"setting {f.name} (default {default!r})")  # fmt: skip


def setting_flags(args: argparse.Namespace) -> dict:
    """The settings given by add_setting_flags' flags, typed as Config's fields."""
    defaults = config.Config()
    out = {}
    for name, value in vars(args).items():
        if name.startswith(SETTING_PREFIX) and value is not None:
            field = name[len(SETTING_PREFIX) :]
            current = getattr(defaults, field)
            out[field] = value if isinstance(value, bool) else config.coerce(value, current)
    return out


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="warren", description="Warren, a clustered AMQP 1.0 broker")
    parser.add_argument("--version", action="version", version=f"warren {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    server = sub.add_parser("server", help="run a broker node")
    server.add_argument("--config", help="TOML config file")
    server.add_argument("--node-name")
    server.add_argument("--data-dir")
    server.add_argument("--listen-host")
    server.add_argument("--amqp-port", type=int)
    server.add_argument("--http-port", type=int)
    server.add_argument("--metrics-port", type=int)
    server.add_argument("--grpc-port", type=int, help="cluster port (25672); 0 picks a free one on the first boot and keeps it; -1: no cluster, a single node whose metadata store listens on loopback only (no --seeds)")
    server.add_argument("--seeds", help="the other members' cluster addresses, host:port,... (first boot only)")
    server.add_argument("--seeds-dns", metavar="NAME[:PORT]",
                        help="peer discovery: join (or form) the cluster of every address NAME resolves to,"
                        " at PORT (default --grpc-port); first boot only, not with --seeds")  # fmt: skip
    server.add_argument("--cluster-secret", help="shared by every member (WARREN_CLUSTER_SECRET)")
    server.add_argument("--advertise-host", help="the host peers dial for this node (default: --listen-host)")
    server.add_argument("--cluster-tls-cert", help="PEM certificate for mutual TLS between nodes")
    server.add_argument("--cluster-tls-key", help="PEM private key for mutual TLS between nodes")
    server.add_argument("--cluster-tls-ca", help="PEM CA that signed every node's certificate")
    server.add_argument("--enable-test-faults", action="store_true", default=None,
                        help="test-only HTTP endpoints: cluster partition switch and key-value probe")  # fmt: skip
    server.add_argument("--definitions", help="JSON file of queues, exchanges and bindings to declare at start")
    add_setting_flags(server)
    server.set_defaults(func=_server)
    ctl.add_parser(sub)
    migrate.add_parser(sub)
    audit_cli.add_parser(sub)  # pyspark is imported only when `warren audit ...` runs
    return parser


if __name__ == "__main__":
    sys.exit(main())
