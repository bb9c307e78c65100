"""Runs a node's process (the node of one process, or one of its workers: node/start.py
decides) until SIGTERM or SIGINT; SIGHUP reloads its TLS certificate."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

import uvloop

from node.broker import Broker
from node.client.tls import TlsError
from node.cluster.discovery import DiscoveryFailed
from node.cluster.enabled_flags import DowngradeRefused
from node.config import Config
from node.ops.allocator import apply_malloc_settings
from node.ops.first_run import console_lines
from node.ops.gc_settings import apply_gc_settings
from node.ops.logs import NodeLogs
from node.ops.logs import install as install_logs
from node.workers.process import worker_config
from node.workers.worker_node import serve_worker
from routing.users import check_password


async def serve(cfg: Config, logs: NodeLogs) -> None:
    broker = Broker(cfg, logs)
    await broker.start()
    # Before the banner: a client that reads it may connect and the node be stopped at once,
    # while the first-run lines still hash the default password (SIGTERM then killed it unclosed).
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, lambda: reload_tls(broker))
    tuned = apply_gc_settings(cfg.gc_gen0_threshold)
    if tuned:
        logging.getLogger("warren.memory").info("garbage collector: %s", tuned)

    # Tests and scripts parse this line: the amqp URL first, then the ports.
    def port(value: int | None) -> int | str:
        return value if value is not None else "off"

    # the plain listener's URL, or the TLS one's when it is the only one
    scheme, amqp = ("amqp", broker.amqp_port) if broker.amqp_port is not None else ("amqps", broker.amqps_port)
    print(f"warren {cfg.node_name} listening on {scheme}://{cfg.listen_host}:{amqp} http={port(broker.http_port)} "
          f"metrics={port(broker.metrics_port)} amqps={port(broker.amqps_port)} https={port(broker.https_port)} "
          f"metrics_tls={port(broker.metrics_tls_port)}", flush=True)  # fmt: skip
    for line in await first_run_lines(cfg, broker):
        print(line, flush=True)
    await stop.wait()
    await broker.stop()


async def first_run_lines(cfg: Config, broker: Broker) -> list[str]:
    """Where the console is, and the default login while it still works (checked
    off the loop: the password hash is slow on purpose)."""
    user = broker.auth.users.get(cfg.default_user)
    works = user is not None and await asyncio.get_running_loop().run_in_executor(
        None, check_password, cfg.default_password, user.password_hash)  # fmt: skip
    return console_lines(cfg.listen_host, broker.http_port, broker.https_port, cfg.default_user if works else None,
                         cfg.default_password, cfg.default_user in broker.auth.loopback_users)  # fmt: skip


def reload_tls(broker: Broker) -> None:
    try:
        if not broker.reload_tls():
            logging.getLogger("warren.tls").info("SIGHUP: no TLS configured, nothing to reload")
    except TlsError as e:  # keep serving with the certificate already loaded
        logging.getLogger("warren.tls").error("SIGHUP: TLS reload failed, the previous certificate stays: %s", e)


def serve_process(cfg: Config, worker: int | None) -> int:
    """The node of one process (`worker` None), or worker `worker` of a node of several."""
    if worker is not None:
        cfg = worker_config(cfg)
    try:
        logs = install_logs(cfg)
    except OSError as e:  # the log file cannot be opened: a setting to fix, as for a bad value
        print(f"warren: cannot open the log file: {e}", file=sys.stderr, flush=True)
        return 78  # EX_CONFIG
    # before any thread of the node allocates: glibc creates an arena per such thread
    applied = apply_malloc_settings(cfg.malloc_arena_max, cfg.malloc_mmap_threshold)
    if applied:
        logging.getLogger("warren.memory").info("malloc settings: %s", applied)
    try:
        uvloop.run(serve(cfg, logs) if not worker else serve_worker(cfg, worker))
    except DowngradeRefused as e:
        logging.getLogger("warren.upgrade").error("refusing to start: %s", e)
        print(f"warren: refusing to start: {e}", file=sys.stderr, flush=True)
        return 78  # EX_CONFIG: the data needs another build, a restart will not help
    except DiscoveryFailed as e:
        logging.getLogger("warren.cluster").error("not starting: %s", e)
        print(f"warren: not starting: {e}", file=sys.stderr, flush=True)
        return 69  # EX_UNAVAILABLE: the peers may be there on the next try (a restart policy retries)
    return 0
