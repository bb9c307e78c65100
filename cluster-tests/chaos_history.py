"""The history of a chaos run, as Jepsen keeps it: every operation any process performed.

An operation is one client call (a publish, a delivery) or one fault (kill -9, partition):
who did it (`process`), what (`f`), on what (`value`), when it started and ended (seconds
since the history began, monotonic), and how it ended (`type`):

    ok    it happened (a publish the broker confirmed, a message a consumer received)
    fail  it certainly did not happen (a publish the broker rejected or released)
    info  unknown: it may or may not have happened (a publish whose connection died
          before the confirm arrived, a fault whose command errored)

The checker (chaos_checker.py) reads nothing but this list.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

OK, FAIL, INFO = "ok", "fail", "info"
TYPES = (OK, FAIL, INFO)


@dataclass(frozen=True)
class Op:
    process: str  # "publisher-0", "consumer-1", "nemesis", ...
    f: str  # "enqueue", "dequeue", "kill9", "partition", ...
    type: str  # ok | fail | info
    value: Any
    start: float  # seconds since the history began
    end: float
    node: str | None = None  # the node the process talked to, or the fault's target
    error: str | None = None  # why it failed or is unknown
    meta: dict = field(default_factory=dict)  # e.g. {"redelivered": True} on a dequeue

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise ValueError(f"op type must be one of {TYPES}, not {self.type!r}")

    @property
    def duration(self) -> float:
        return self.end - self.start


class OpHandle:
    """The outcome of an operation in progress (see History.op); ok unless told otherwise."""

    def __init__(self, value: Any):
        self.value = value
        self.type = OK
        self.error: str | None = None
        self.meta: dict = {}

    def ok(self, value: Any = None, **meta: Any) -> None:
        self.type = OK
        if value is not None:
            self.value = value
        self.meta.update(meta)

    def fail(self, error: str = "") -> None:
        self.type, self.error = FAIL, error or None

    def info(self, error: str = "") -> None:
        self.type, self.error = INFO, error or None


class History:
    """A thread-safe, append-only list of operations."""

    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._origin = clock()
        self._ops: list[Op] = []
        self._lock = threading.Lock()

    def now(self) -> float:
        """Seconds since the history began."""
        return self._clock() - self._origin

    def add(self, op: Op) -> Op:
        with self._lock:
            self._ops.append(op)
        return op

    def record(self, process: str, f: str, type: str, value: Any = None, start: float | None = None,
               end: float | None = None, node: str | None = None, error: str | None = None,
               **meta: Any) -> Op:  # fmt: skip
        end = self.now() if end is None else end
        return self.add(Op(process, f, type, value, end if start is None else start, end, node, error, meta))

    @contextmanager
    def op(self, process: str, f: str, value: Any = None, node: str | None = None) -> Iterator[OpHandle]:
        """Time an operation; an exception inside makes it `info` (unknown outcome) and goes on."""
        handle = OpHandle(value)
        start = self.now()
        try:
            yield handle
        except BaseException as e:
            handle.info(f"{type(e).__name__}: {e}")
            raise
        finally:
            self.record(process, f, handle.type, handle.value, start, self.now(), node, handle.error,
                        **handle.meta)  # fmt: skip

    def ops(self, f: str | None = None, type: str | None = None, process: str | None = None) -> list[Op]:
        with self._lock:
            ops = list(self._ops)
        return [o for o in ops if (f is None or o.f == f) and (type is None or o.type == type)
                and (process is None or o.process == process)]  # fmt: skip

    def __len__(self) -> int:
        with self._lock:
            return len(self._ops)

    def dump(self, path) -> None:
        """One JSON object per line, in completion order."""
        with open(path, "w") as out:
            for op in self.ops():
                out.write(json.dumps(asdict(op), default=str) + "\n")

    def faults(self) -> list[Op]:
        return self.ops(process="nemesis")
