"""Runs a node until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

import uvloop

from node.broker import Broker
from node.config import Config


class _KeyValueFormatter(logging.Formatter):
    """One structured line per record: ts=... level=... logger=... msg=..."""

    def format(self, record: logging.LogRecord) -> str:
        line = (
            f"ts={self.formatTime(record, '%Y-%m-%dT%H:%M:%S')}.{int(record.msecs):03d} "
            f"level={record.levelname.lower()} logger={record.name} msg={record.getMessage()!r}"
        )
        if record.exc_info:
            line += " exc=" + repr(self.formatException(record.exc_info))
        return line


def setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_KeyValueFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


async def serve(cfg: Config) -> None:
    broker = Broker(cfg)
    await broker.start()
    # Tests and scripts parse this line: the amqp URL first, then the ports.
    http = broker.http_port if broker.http_port is not None else "off"
    metrics = broker.metrics_port if broker.metrics_port is not None else "off"
    print(f"warren {cfg.node_name} listening on amqp://{cfg.listen_host}:{broker.amqp_port} http={http} "
          f"metrics={metrics}", flush=True)  # fmt: skip
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await broker.stop()


def run(cfg: Config) -> int:
    setup_logging(cfg.log_level)
    uvloop.run(serve(cfg))
    return 0
