"""The `warren` command: `warren server` runs a node, `warren ctl` manages one."""

from __future__ import annotations

import argparse
import sys

from . import ctl


def _server(args: argparse.Namespace) -> int:
    from . import config
    from .main import run

    cfg = config.load(
        args.config,
        overrides={
            "node_name": args.node_name,
            "data_dir": args.data_dir,
            "listen_host": args.listen_host,
            "amqp_port": args.amqp_port,
            "http_port": args.http_port,
            "metrics_port": args.metrics_port,
            "grpc_port": args.grpc_port,
            "definitions_file": args.definitions,
        },
    )
    return run(cfg)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="warren", description="Warren, a clustered AMQP 1.0 broker")
    sub = parser.add_subparsers(dest="command", required=True)
    server = sub.add_parser("server", help="run a broker node")
    server.add_argument("--config", help="TOML config file")
    server.add_argument("--node-name")
    server.add_argument("--data-dir")
    server.add_argument("--listen-host")
    server.add_argument("--amqp-port", type=int)
    server.add_argument("--http-port", type=int)
    server.add_argument("--metrics-port", type=int)
    server.add_argument("--grpc-port", type=int)
    server.add_argument("--definitions", help="JSON file of queues, exchanges and bindings to declare at start")
    server.set_defaults(func=_server)
    ctl.add_parser(sub)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
