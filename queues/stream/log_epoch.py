"""The epoch a stream's log on this node was last checked against (the file
`epoch` in its directory), fsynced before the log takes that epoch's
chunks. A failover prefers the replica whose log is of the newest epoch,
then the longest (queues/stream/replica.py, node/vhosts/stream_failover.py):
a longer log of an older epoch may hold a tail no leader committed.

Beside it, the file `fence`: the newest epoch the replica was stopped for
(queues/stream/replica.py `stop`), so that a node restarted while its copy
is fenced does not follow the old leader again. It is replaced atomically
but not fsynced: a stop is answered on the event loop, and the file has to
outlive a killed process, which the page cache does."""

from __future__ import annotations

import os

__all__ = ["raise_log_epoch", "read_fence", "read_log_epoch", "write_fence", "write_log_epoch"]

NAME = "epoch"
FENCE = "fence"


def read_log_epoch(directory: str) -> int:
    return _read(directory, NAME)


def read_fence(directory: str) -> int:
    return _read(directory, FENCE)


def write_fence(directory: str, epoch: int) -> None:
    os.makedirs(directory, exist_ok=True)
    _replace(directory, FENCE, epoch, durable=False)


def _read(directory: str, name: str) -> int:
    try:
        with open(os.path.join(directory, name)) as f:
            return int(f.read().strip() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def write_log_epoch(directory: str, epoch: int) -> None:
    """Atomically and durably (the worker thread: it fsyncs)."""
    _replace(directory, NAME, epoch, durable=True)


def _replace(directory: str, name: str, value: int, durable: bool) -> None:
    path = os.path.join(directory, name)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(value))
        if durable:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if durable:
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
