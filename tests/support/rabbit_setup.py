"""The RabbitMQ 3.10 that interoperability tests run beside Warren: bench/setup.sh
installs it (Debian's rabbitmq-server with its AMQP 1.0 plugin, rabbitmqadmin,
the arrow load generator) and bench/rabbitmq.py starts a private node on the
ports a test gives. A set-up that fails fails the test, naming the step: on a
machine where the project's own scripts work, nothing here is skipped."""

from __future__ import annotations

import functools
import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"


@functools.cache
def _set_up() -> str | None:
    """bench/setup.sh once per test session (it is idempotent, but not free); its error or None."""
    done = subprocess.run(["sh", str(BENCH / "setup.sh")], capture_output=True, text=True, timeout=900)
    return None if done.returncode == 0 else done.stderr.strip()[-500:]


def bench_module(name: str) -> ModuleType:
    """A module of bench/ (rabbitmq, migrate_failover, ...), RabbitMQ installed first."""
    error = _set_up()
    if error is not None:
        pytest.fail(f"bench/setup.sh (installs RabbitMQ 3.10) failed: {error}")
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))


def rabbit_node_class() -> type:
    """bench/rabbitmq.py's RabbitNode, RabbitMQ installed first."""
    return bench_module("rabbitmq").RabbitNode
