"""The epoch a stream's log on this node was last checked against (the file
`epoch` in its directory), fsynced before the log takes that epoch's
chunks. A failover prefers the replica whose log is of the newest epoch,
then the longest (queues/stream/replica.py, node/vhosts/stream_failover.py):
a longer log of an older epoch may hold a tail no leader committed."""

from __future__ import annotations

import os

__all__ = ["raise_log_epoch", "read_log_epoch", "write_log_epoch"]

NAME = "epoch"


def read_log_epoch(directory: str) -> int:
    try:
        with open(os.path.join(directory, NAME)) as f:
            return int(f.read().strip() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def write_log_epoch(directory: str, epoch: int) -> None:
    """Atomically and durably (the worker thread: it fsyncs)."""
    path = os.path.join(directory, NAME)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(epoch))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def raise_log_epoch(directory: str, epoch: int) -> None:
    """Records `epoch` unless the file already has a newer one (a node replaying
    the metadata passes through old epochs: the file never goes back)."""
    if epoch > read_log_epoch(directory):
        os.makedirs(directory, exist_ok=True)
        write_log_epoch(directory, epoch)
