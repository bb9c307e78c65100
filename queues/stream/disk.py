"""What a node's streams share about their disk: the streams whose last write
failed for want of space (the disk alarm's input), and injected test faults.

A stream write that fails (queues/stream/queue.py, replica.py) abandons its
chunks and rejects their publishers, as before; when it failed with ENOSPC
or EDQUOT the stream also waits here, which raises the node's disk alarm
(node/broker.py `_stores_full`), so publishers stop. Nothing retries a
stream's write by itself (it is its next publish, or a replica's next fetch),
and no publish comes while the alarm holds the publishers, so the alarm's own
check clears a wait: at the first check after the one that saw it, once the
filesystem has room for the failed write and HEADROOM more. A write that lands
clears it too.
"""

from __future__ import annotations

from storage.batch import is_no_space
from storage.faults import DiskFaults

__all__ = ["HEADROOM", "StreamDisk"]

HEADROOM = 1 << 20  # free bytes wanted beyond the failed write before its stream stops waiting


class StreamDisk:
    def __init__(self, faults: DiskFaults | None = None) -> None:
        self.faults = faults  # tests only (storage/faults.py): checked on the writer threads
        self._waiting: dict[str, tuple[int, bool]] = {}  # stream -> (bytes of its failed write, seen by a check)

    def failed(self, stream: str, size: int, error: BaseException) -> bool:
        """A write of `size` bytes failed with `error`; True if for want of space (the stream then waits)."""
        if not is_no_space(error):
            return False
        self._waiting[stream] = (size, False)
        return True

    def wrote(self, stream: str) -> None:
        self._waiting.pop(stream, None)

    def out_of_space(self, free: int | None) -> bool:
        """The alarm's check, with the free bytes it measured: whether any stream waits for space
        (those seen by an earlier check whose write now fits stop waiting first)."""
        waiting = self._waiting
        if not waiting:
            return False
        for stream, (size, seen) in list(waiting.items()):
            if seen and free is not None and free >= size + HEADROOM:
                del waiting[stream]
            else:
                waiting[stream] = (size, True)
        return bool(waiting)

    @property
    def waiting(self) -> list[str]:
        return sorted(self._waiting)
