"""node/workers/process.py: what each worker of a node takes of the node's settings."""

from __future__ import annotations

from node.config import Config
from node.workers.process import worker_config


def test_each_worker_takes_its_share_of_the_memory_watermark_and_the_connection_limit():
    cfg = worker_config(Config(workers=3, memory_high_watermark=0.6, max_connections=10))
    assert abs(cfg.memory_high_watermark - 0.2) < 1e-9
    assert cfg.max_connections == 4  # rounded up: 3 workers together allow 12, not fewer than 10
    assert cfg.workers == 3


def test_no_connection_limit_stays_none():
    assert worker_config(Config(workers=2, max_connections=0)).max_connections == 0
