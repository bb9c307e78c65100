"""Checkers over a chaos history (chaos_history.py). Pure: they read a list of ops, nothing else.

`check_total_queue` is Jepsen's total-queue checker for a queue workload: every publish is
an `enqueue` of a unique value, every delivery a `dequeue` of one, and

    lost        confirmed (enqueue ok) but never consumed      -> invalid
    unexpected  consumed but never published                   -> invalid
    resurrected published, the broker said it failed (enqueue fail), consumed all the same
                                                               -> invalid
    duplicated  consumed more than once; allowed only when every extra copy came marked
                as a redelivery (first-acquirer false or delivery-count > 0); unmarked
                extra copies are invalid unless allow_unmarked_duplicates
    recovered   publish outcome unknown (enqueue info), consumed: fine, at-least-once

plus what a reader wants to see: how many were published, confirmed, consumed, and the
longest time no publish was confirmed (unavailability).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from chaos_history import FAIL, INFO, OK, Op

ENQUEUE, DEQUEUE = "enqueue", "dequeue"


def longest_gap(times: Iterable[float], start: float, end: float) -> tuple[float, float, float]:
    """The longest interval within [start, end] holding none of `times`: (length, from, to)."""
    points = sorted(t for t in times if start <= t <= end)
    best = (0.0, start, start)
    previous = start
    for t in [*points, end]:
        if t - previous > best[0]:
            best = (t - previous, previous, t)
        previous = t
    return best


@dataclass
class QueueCheck:
    attempted: int = 0  # enqueue operations, whatever their outcome
    confirmed: int = 0  # enqueue ok
    failed: int = 0  # enqueue fail
    indeterminate: int = 0  # enqueue info
    deliveries: int = 0  # dequeues that got a message, duplicates included
    consumed: int = 0  # distinct values consumed
    lost: set = field(default_factory=set)
    unexpected: set = field(default_factory=set)
    resurrected: set = field(default_factory=set)
    recovered: set = field(default_factory=set)
    duplicated: dict = field(default_factory=dict)  # value -> times consumed (> 1)
    redelivered_copies: int = 0  # extra copies marked as redeliveries
    unmarked_copies: int = 0  # extra copies not marked
    unmarked: set = field(default_factory=set)  # values with an unmarked extra copy
    allow_unmarked_duplicates: bool = False
    longest_unavailability: float = 0.0  # seconds without a confirmed publish
    unavailable_from: float = 0.0
    unavailable_to: float = 0.0

    @property
    def valid(self) -> bool:
        return not (self.lost or self.unexpected or self.resurrected
                    or (self.unmarked and not self.allow_unmarked_duplicates))  # fmt: skip

    def problems(self) -> list[str]:
        out = []
        for name in ("lost", "unexpected", "resurrected"):
            values = getattr(self, name)
            if values:
                out.append(f"{len(values)} {name}: {_sample(values)}")
        if self.unmarked and not self.allow_unmarked_duplicates:
            out.append(f"{len(self.unmarked)} consumed twice without a redelivery mark: {_sample(self.unmarked)}")
        return out

    def summary(self) -> str:
        lines = [
            f"published {self.attempted} (confirmed {self.confirmed}, failed {self.failed}, "
            f"unknown {self.indeterminate})",
            f"consumed {self.consumed} distinct in {self.deliveries} deliveries; "
            f"recovered (unknown outcome, consumed) {len(self.recovered)}",
            f"lost {len(self.lost)}, unexpected {len(self.unexpected)}, resurrected {len(self.resurrected)}, "
            f"duplicated {len(self.duplicated)} ({self.redelivered_copies} marked redeliveries, "
            f"{self.unmarked_copies} unmarked)",
            f"longest unavailability {self.longest_unavailability:.2f}s "
            f"(t={self.unavailable_from:.1f}s..{self.unavailable_to:.1f}s)",
            "valid" if self.valid else "INVALID: " + "; ".join(self.problems()),
        ]
        return "\n".join(lines)

    def as_row(self) -> dict:
        return {"published": self.attempted, "confirmed": self.confirmed, "consumed": self.consumed,
                "lost": len(self.lost), "unexpected": len(self.unexpected), "duplicated": len(self.duplicated),
                "unmarked": len(self.unmarked), "unavailability_s": round(self.longest_unavailability, 2),
                "valid": self.valid}  # fmt: skip


def _sample(values: Iterable, n: int = 10) -> str:
    items = sorted(values, key=lambda v: (str(type(v)), v))
    more = f" ... (+{len(items) - n})" if len(items) > n else ""
    return ", ".join(map(str, items[:n])) + more


def check_total_queue(ops: Iterable[Op], allow_unmarked_duplicates: bool = False) -> QueueCheck:
    """Jepsen's total-queue over `enqueue` and `dequeue` ops (see the module docstring)."""
    ops = list(ops)
    enqueues = [o for o in ops if o.f == ENQUEUE]
    # A dequeue that returned a message counts whether its acknowledgement went through (ok)
    # or not (info): a client saw the message either way.
    dequeues = sorted((o for o in ops if o.f == DEQUEUE and o.type in (OK, INFO) and o.value is not None),
                      key=lambda o: (o.start, o.end))  # fmt: skip
    result = QueueCheck(allow_unmarked_duplicates=allow_unmarked_duplicates)
    attempted = {o.value for o in enqueues}
    confirmed = {o.value for o in enqueues if o.type == OK}
    failed = {o.value for o in enqueues if o.type == FAIL}
    unknown = {o.value for o in enqueues if o.type == INFO}
    counts = Counter(o.value for o in dequeues)
    consumed = set(counts)

    result.attempted = len(enqueues)
    result.confirmed, result.failed, result.indeterminate = len(confirmed), len(failed), len(unknown)
    result.deliveries, result.consumed = len(dequeues), len(consumed)
    result.lost = confirmed - consumed
    result.unexpected = consumed - attempted
    result.resurrected = (failed - confirmed - unknown) & consumed
    result.recovered = (unknown - confirmed) & consumed
    result.duplicated = {v: n for v, n in counts.items() if n > 1}
    seen: set = set()
    for o in dequeues:
        if o.value not in seen:
            seen.add(o.value)
        elif o.meta.get("redelivered"):
            result.redelivered_copies += 1
        else:
            result.unmarked_copies += 1
            result.unmarked.add(o.value)

    if enqueues:
        start = min(o.start for o in enqueues)
        end = max(o.end for o in enqueues)
        gap = longest_gap((o.end for o in enqueues if o.type == OK), start, end)
        result.longest_unavailability, result.unavailable_from, result.unavailable_to = gap
    return result


def fault_timeline(ops: Iterable[Op]) -> str:
    """The nemesis's operations, one line each, for a report."""
    lines = []
    for o in sorted((o for o in ops if o.process == "nemesis"), key=lambda o: o.start):
        what = f"{o.f} {o.value}" if o.value is not None else o.f
        tail = f" ({o.error})" if o.error else ""
        if o.meta:
            tail += " " + " ".join(f"{k}={v}" for k, v in sorted(o.meta.items()))
        lines.append(f"  t={o.start:6.1f}s..{o.end:6.1f}s  {what}: {o.type}{tail}")
    return "\n".join(lines)
