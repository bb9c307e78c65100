"""Injected disk faults, for tests: make a store's next writes or fsyncs fail.

A node started with `enable_test_faults` keeps one `DiskFaults` and hands it
to its stores (the message store's and the Raft log's `BatchWriter`, every
stream's segment writes); `POST /api/cluster/test/disk_fault` arms it
(node/http/cluster_routes.py). Each store asks `check(store, op)` right
before the real call (`op` "write": the write of a batch or chunk, "fsync":
its sync), on whatever thread does that I/O, and an armed fault raises the
OSError the kernel would (ENOSPC, EDQUOT or EIO), so what follows is the
store's real failure path. Without `enable_test_faults` no store has one.
"""

from __future__ import annotations

import errno
import os
import threading

__all__ = ["ERRORS", "OPS", "STORES", "DiskFaults"]

STORES = ("messages", "raft", "stream")
OPS = ("write", "fsync")
ERRORS = {"ENOSPC": errno.ENOSPC, "EDQUOT": errno.EDQUOT, "EIO": errno.EIO}


class DiskFaults:
    """Armed faults by (store, op): the errno to raise and how many more times (None: until cleared)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # check() runs on the stores' writer threads
        self._armed: dict[tuple[str, str], tuple[int, int | None]] = {}
        self.fired: dict[str, int] = {store: 0 for store in STORES}

    def arm(self, store: str, op: str, error: str, count: int | None) -> None:
        """Fail the next `count` (None: every, until `clear`) `op`s of `store` with `error`."""
        if store not in STORES:
            raise ValueError(f"unknown store {store!r}: one of {', '.join(STORES)}")
        if op not in OPS:
            raise ValueError(f"unknown op {op!r}: one of {', '.join(OPS)}")
        if error not in ERRORS:
            raise ValueError(f"unknown error {error!r}: one of {', '.join(ERRORS)}")
        if count is not None and count < 1:
            raise ValueError("count must be at least 1 (clear() disarms)")
        with self._lock:
            self._armed[(store, op)] = (ERRORS[error], count)

    def clear(self, store: str | None = None) -> None:
        """Disarm every fault of `store` (None: of every store)."""
        with self._lock:
            for key in [k for k in self._armed if store is None or k[0] == store]:
                del self._armed[key]

    def check(self, store: str, op: str) -> None:
        """Raise the armed OSError for this `op` of `store`, if any (counting it down)."""
        if not self._armed:
            return
        with self._lock:
            armed = self._armed.get((store, op))
            if armed is None:
                return
            code, left = armed
            if left is not None:
                if left <= 1:
                    del self._armed[(store, op)]
                else:
                    self._armed[(store, op)] = (code, left - 1)
            self.fired[store] += 1
        raise OSError(code, f"{os.strerror(code)} (injected test fault)")

    def describe(self) -> dict:
        with self._lock:
            armed = [{"store": s, "op": o, "error": errno.errorcode[code], "count": left}
                     for (s, o), (code, left) in sorted(self._armed.items())]  # fmt: skip
            return {"armed": armed, "fired": dict(self.fired)}
