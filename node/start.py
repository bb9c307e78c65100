"""`warren server`: how many workers the node runs (one per usable core by default), the
queues of workers it no longer runs moved onto the others, then the supervisor of a node of
several workers, or the node's one process (node/main.py). Light on purpose: the supervisor
imports none of the node it supervises, its workers being fresh interpreters (docs/
architecture.md "Workers": 37 MB resident instead of 83)."""

from __future__ import annotations

import dataclasses
import sys

from node.config import Config
from node.workers.cores import usable_cores
from node.workers.process import supervise, worker_index
from node.workers.take_over import take_over_queues
from storage.message_store import StoreError

__all__ = ["run"]


def run(cfg: Config) -> int:
    if cfg.workers == 0:  # the default: as many as the cores this process may use
        cfg = dataclasses.replace(cfg, workers=usable_cores())
    worker = worker_index() if cfg.workers > 1 else None
    if worker is None:  # the supervisor, or a node of one process: before any store is opened
        try:
            take_over_queues(cfg.data_dir, cfg.workers)
        except (OSError, StoreError) as e:
            print(f"warren: cannot move the queues of workers this node no longer runs: {e}", file=sys.stderr,
                  flush=True)  # fmt: skip
            return 74  # EX_IOERR
        if cfg.workers > 1:  # the supervisor: it starts each worker with this command line
            return supervise(cfg, sys.argv[1:])
    from node.main import serve_process  # the node itself: only a process that serves loads it

    return serve_process(cfg, worker)
