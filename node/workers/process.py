"""`warren server --workers N` (issue 36): which process this is, and what it runs.

The command the operator starts is the supervisor (supervisor.py): it binds
the AMQP ports the settings leave to the kernel (port 0) once, so that every
worker listens on the same one, then starts N copies of its own command line
with WARREN_WORKER=K and those ports. Worker 0 runs the node (node/broker.py);
workers 1..N-1 run `WorkerNode` (worker_node.py `serve_worker`). The
supervisor imports none of the node it supervises (node/start.py). Each
worker's memory alarm watches its share of the node's watermark, and each
worker takes its share of the node's `max_connections`, so the node as a
whole stays under both."""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import sys

from node.config import Config
from node.ops.logs import install as install_logs

from .supervisor import Supervisor, lost_path

__all__ = ["WORKER_ENV", "supervise", "worker_config", "worker_index"]

WORKER_ENV = "WARREN_WORKER"  # set by the supervisor: this process's worker number

log = logging.getLogger("warren.workers")


def worker_index() -> int | None:
    """This process's worker number; None in the supervisor (or a node of one process)."""
    value = os.environ.get(WORKER_ENV)
    return int(value) if value is not None and value.isdigit() else None


def worker_config(cfg: Config) -> Config:
    """A worker's settings: the node's, with its share of the memory watermark and of the
    node's connection limit (each worker counts its own)."""
    share = -(-cfg.max_connections // cfg.workers) if cfg.max_connections > 0 else cfg.max_connections
    return dataclasses.replace(cfg, memory_high_watermark=cfg.memory_high_watermark / cfg.workers,
                               max_connections=share)  # fmt: skip


def supervise(cfg: Config, argv: list[str]) -> int:
    """Bind what the workers must share, start them, and keep them running until stopped."""
    try:
        install_logs(cfg)  # the node's outputs, formats and levels, as each worker's
    except OSError as e:
        print(f"warren: cannot open the log file: {e}", file=sys.stderr, flush=True)
        return 78  # EX_CONFIG
    held: list[socket.socket] = []  # bound, not listening: it keeps the port for the workers
    ports: list[str] = []
    wanted = [("--amqp-port", cfg.amqp_port), ("--amqps-port", cfg.amqps_port if cfg.tls_cert else -1)]
    for flag, port in wanted:
        if port == 0:
            sock = socket.socket(socket.AF_INET6 if ":" in cfg.listen_host else socket.AF_INET)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((cfg.listen_host, 0))
            held.append(sock)
            ports += [flag, str(sock.getsockname()[1])]
    # the count decided here (the usable cores by default), so that no worker decides another
    command = [sys.executable, "-m", "node.cli", *argv, *ports, "--workers", str(cfg.workers)]
    try:
        return Supervisor([command] * cfg.workers, lost=lost_path(cfg.data_dir)).run()
    finally:
        for sock in held:
            sock.close()
