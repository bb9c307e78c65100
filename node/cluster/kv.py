"""A versioned key-value map as a replicated machine: the cluster tests' probe.

A node run with --enable-test-faults hosts it beside the metadata machine
(node/cluster/machine.py) and serves it under /api/cluster/test/kv, so the
process-level cluster tests can write and read through Raft without going
through the metadata; other nodes do not host it."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from amqp import codec
from raft.records import command

__all__ = ["KeyValueMachine", "Put"]


@command("cluster.put", version=1)
@dataclass(frozen=True)
class Put:
    """Set `key` to `value`; a Put with a non-empty idempotency_key seen before changes nothing."""

    key: str
    value: str
    idempotency_key: str = ""


class KeyValueMachine:
    """`apply(Put)` returns the key's version after the put (1 for a new key).

    A Put whose idempotency_key was applied before returns the version that
    one produced (the last MAX_REMEMBERED keys are kept, in the snapshot too),
    so a client may retry a Put whose outcome it does not know.
    """

    SNAPSHOT_FORMAT = 1
    MAX_REMEMBERED = 10_000

    def __init__(self) -> None:
        self.data: dict[str, tuple[str, int]] = {}
        self._seen: OrderedDict[str, int] = OrderedDict()

    def apply(self, record: Any, index: int) -> Any:
        if not isinstance(record, Put):
            return None
        if record.idempotency_key:
            done = self._seen.get(record.idempotency_key)
            if done is not None:
                return done
        version = self.data.get(record.key, ("", 0))[1] + 1
        self.data[record.key] = (record.value, version)
        if record.idempotency_key:
            self._seen[record.idempotency_key] = version
            if len(self._seen) > self.MAX_REMEMBERED:
                self._seen.popitem(last=False)
        return version

    def get(self, key: str) -> tuple[str, int] | None:
        return self.data.get(key)

    def snapshot(self) -> bytes:
        return codec.dumps([self.SNAPSHOT_FORMAT, [[k, v, n] for k, (v, n) in self.data.items()],
                            [[k, n] for k, n in self._seen.items()]])  # fmt: skip

    def restore(self, data: bytes) -> None:
        fmt, items, seen = codec.loads(data)
        if fmt != self.SNAPSHOT_FORMAT:
            raise ValueError(f"key-value snapshot format {fmt}, this Warren reads {self.SNAPSHOT_FORMAT}")
        self.data = {str(k): (str(v), int(n)) for k, v, n in items}
        self._seen = OrderedDict((str(k), int(n)) for k, n in seen)
