"""Checkers over a chaos history (chaos_history.py). Pure: they read a list of ops, nothing else.

`check_total_queue` is Jepsen's total-queue checker for a queue workload: every publish is
an `enqueue` of a unique value, every delivery a `dequeue` of one, and

    lost        confirmed (enqueue ok) but never consumed      -> invalid
    unexpected  consumed but never published                   -> invalid
    resurrected published, the broker said it failed (enqueue fail), consumed all the same
                                                               -> invalid
    duplicated  consumed more than once; allowed only when every copy but one came marked
                as a redelivery (first-acquirer false or delivery-count > 0), whatever the
                order the clients received them in; unmarked extra copies are invalid
                unless allow_unmarked_duplicates
    recovered   publish outcome unknown (enqueue info), consumed: fine, at-least-once

plus what a reader wants to see: how many were published, confirmed, consumed, and the
longest time no publish was confirmed (unavailability), from the first confirm to the end of
the last publish.

`check_metadata` says whether every acknowledged metadata change (an exchange declared or
deleted, a binding made or removed) is visible on every node at the end, from the ops of the
metadata workload and a final read of every node taken after the cluster converged.

`leader_disagreements` says which Raft groups have not converged, from what each node names
as each group's leader.
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
    longest_unavailability: float = 0.0  # seconds without a confirmed publish, after the first
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
    # At most one delivery of a message may claim to be its first acquisition. Which one it
    # was is not told by when the clients received them: two consumers on different nodes
    # see the broker's order through different proxies (a redelivery reached its client 7 ms
    # before the first delivery reached another, in the upgrade test).
    unmarked_deliveries = Counter(o.value for o in dequeues if not o.meta.get("redelivered"))
    for value, n in result.duplicated.items():
        extra_unmarked = max(unmarked_deliveries[value] - 1, 0)
        result.redelivered_copies += n - 1 - extra_unmarked
        if extra_unmarked:
            result.unmarked_copies += extra_unmarked
            result.unmarked.add(value)

    if enqueues:
        # from the first confirm on: before it a new queue is still electing its first leader
        confirms = [o.end for o in enqueues if o.type == OK]
        start = min(confirms) if confirms else min(o.start for o in enqueues)
        end = max(o.end for o in enqueues)
        gap = longest_gap(confirms, start, end)
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


# ---------------------------------------------------------------- metadata

DECLARE_EXCHANGE, DELETE_EXCHANGE, BIND, UNBIND = "declare-exchange", "delete-exchange", "bind", "unbind"
DECLARE_QUEUE, DELETE_QUEUE = "declare-queue", "delete-queue"
ADD_USER, DELETE_USER, ADD_VHOST, DELETE_VHOST = "add-user", "delete-user", "add-vhost", "delete-vhost"
SET_POLICY, CLEAR_POLICY, SET_PERMISSION, CLEAR_PERMISSION = (
    "set-policy",
    "clear-policy",
    "set-permission",
    "clear-permission",
)
# ops that make their object exist, and the op that removes each
REMOVE = {DECLARE_EXCHANGE: DELETE_EXCHANGE, BIND: UNBIND, DECLARE_QUEUE: DELETE_QUEUE, ADD_USER: DELETE_USER,
          ADD_VHOST: DELETE_VHOST, SET_POLICY: CLEAR_POLICY, SET_PERMISSION: CLEAR_PERMISSION}  # fmt: skip
CREATES = tuple(REMOVE)
REMOVES = tuple(REMOVE.values())
PRESENT, ABSENT, EITHER = "present", "absent", "either"


def expected_state(ops: Iterable[Op]) -> str:
    """What must be true of one object at the end, from every op on it (none overlapping
    another of a different kind, as the workload makes them): the effect of its last
    acknowledged (ok) change; `either` when an op with an unknown outcome (info) did not end
    before that change began, or when none was acknowledged and one is unknown; `absent`
    when every change on it failed (the object did not exist before the history).

    An unknown op that ended before the last acknowledged change began counts as superseded
    by it (the workload never touches an object again after an unknown outcome, so its own
    histories hold none)."""
    ops = [o for o in ops if o.f in CREATES or o.f in REMOVES]
    done = [o for o in ops if o.type == OK]
    unknown = [o for o in ops if o.type == INFO]
    if not done:
        return EITHER if unknown else ABSENT
    last = max(done, key=lambda o: (o.end, o.start))
    creates = last.f in CREATES
    if any(o.end > last.start for o in unknown):
        return EITHER
    if any(o is not last and o.end > last.start and (o.f in CREATES) != creates for o in done):
        return EITHER  # two acknowledged changes of opposite kinds overlapped: either order
    return PRESENT if creates else ABSENT


@dataclass
class MetadataCheck:
    ops: int = 0  # metadata changes attempted
    ok: int = 0  # acknowledged
    failed: int = 0  # refused: certainly not made
    unknown: int = 0  # outcome unknown (info)
    objects: int = 0  # distinct objects changed
    expected: dict = field(default_factory=dict)  # object -> present | absent | either
    missing: dict = field(default_factory=dict)  # object that must exist -> nodes that lack it
    resurrected: dict = field(default_factory=dict)  # object that must be absent -> nodes that have it
    unread: list = field(default_factory=list)  # nodes whose final read failed
    evidence: dict = field(default_factory=dict)  # object in violation -> its ops

    @property
    def violations(self) -> int:
        return len(self.missing) + len(self.resurrected)

    @property
    def valid(self) -> bool:
        return not (self.violations or self.unread)

    def problems(self) -> list[str]:
        out = []
        if self.missing:
            out.append(f"{len(self.missing)} acknowledged but missing: {_sample_nodes(self.missing)}")
        if self.resurrected:
            out.append(f"{len(self.resurrected)} deleted or refused but present: {_sample_nodes(self.resurrected)}")
        if self.unread:
            out.append(f"no final read from {', '.join(self.unread)}")
        for key, ops in list(self.evidence.items())[:5]:
            out.append(f"{key}: " + ", ".join(_describe(o) for o in ops))
        return out

    def summary(self) -> str:
        kinds = Counter(self.expected.values())
        return "\n".join([
            f"metadata changes {self.ops} (ok {self.ok}, failed {self.failed}, unknown {self.unknown}) on "
            f"{self.objects} objects: {kinds[PRESENT]} must exist, {kinds[ABSENT]} must not, {kinds[EITHER]} either",
            f"metadata violations {self.violations} (missing {len(self.missing)}, present though deleted or "
            f"refused {len(self.resurrected)})",
            "metadata valid" if self.valid else "metadata INVALID: " + "; ".join(self.problems()),
        ])  # fmt: skip

    def as_row(self) -> dict:
        return {"md_ok": self.ok, "md_failed": self.failed, "md_unknown": self.unknown,
                "md_violations": self.violations, "md_valid": self.valid}  # fmt: skip


def _describe(o: Op) -> str:
    error = f" ({o.error[:160]})" if o.error else ""
    return f"{o.f} {o.type} via {o.node} t={o.start:.2f}..{o.end:.2f}s{error}"


def _sample_nodes(found: dict, n: int = 5) -> str:
    items = sorted(found.items())
    more = f" ... (+{len(items) - n})" if len(items) > n else ""
    return ", ".join(f"{k} on {'/'.join(sorted(v))}" for k, v in items[:n]) + more


def check_metadata(ops: Iterable[Op], final: dict[str, set | None]) -> MetadataCheck:
    """Every acknowledged metadata change visible on every node: `final` is each node's view at
    the end (the objects it has; None when it could not be read), taken once the cluster
    converged. Objects are the values of the ops (opaque keys such as "exchange NAME"); see
    expected_state for what each must be. Objects no op touched are not looked at."""
    ops = [o for o in ops if o.f in CREATES or o.f in REMOVES]
    result = MetadataCheck(ops=len(ops))
    result.ok = sum(o.type == OK for o in ops)
    result.failed = sum(o.type == FAIL for o in ops)
    result.unknown = sum(o.type == INFO for o in ops)
    by_object: dict = {}
    for o in ops:
        by_object.setdefault(o.value, []).append(o)
    result.objects = len(by_object)
    result.unread = sorted(n for n, view in final.items() if view is None)
    views = {n: view for n, view in final.items() if view is not None}
    for key, object_ops in by_object.items():
        expected = result.expected[key] = expected_state(object_ops)
        if expected == PRESENT:
            lacking = [n for n, view in views.items() if key not in view]
            if lacking:
                result.missing[key] = lacking
        elif expected == ABSENT:
            having = [n for n, view in views.items() if key in view]
            if having:
                result.resurrected[key] = having
        if key in result.missing or key in result.resurrected:
            result.evidence[key] = sorted(object_ops, key=lambda o: o.start)
    return result


# ---------------------------------------------------------------- convergence


NO_REPLICA = "(no replica here)"  # what a node without a replica of a group names as its leader


def leader_disagreements(views: dict[str, dict[str, str | None] | None]) -> dict[str, str]:
    """Which Raft groups have not converged, and why: `views` is, for each node, the leader it
    names for each group (a node name, None when it knows none), or None when the node did not
    answer; a node that holds no replica of a group names NO_REPLICA and is left out. A group has converged when
    every node that holds it names the same leader, that leader is one of the nodes, and it
    names itself (it leads, not just once did)."""
    out: dict[str, str] = {}
    silent = sorted(n for n, v in views.items() if v is None)
    answered = {n: v for n, v in views.items() if v is not None}
    groups = sorted({g for v in answered.values() for g in v})
    for group in groups:
        named = {n: v.get(group, "(no such group)") for n, v in answered.items() if v.get(group) != NO_REPLICA}
        leaders = set(named.values())
        if silent:
            out[group] = f"no answer from {', '.join(silent)}"
        elif len(leaders) != 1:
            out[group] = "nodes disagree: " + ", ".join(f"{n} names {named[n]}" for n in sorted(named))
        else:
            leader = leaders.pop()
            if leader not in named:
                out[group] = f"every node names {leader}, which is not one of them"
    if silent and not groups:
        out["*"] = f"no answer from {', '.join(silent)}"
    return out


@dataclass
class StreamOrderCheck:
    """A stream read by one consumer from its first offset: what each publisher had confirmed
    must come back in the order it was published, each message once."""

    read: int = 0  # deliveries, in offset order
    out_of_order: list = field(default_factory=list)  # (publisher, value, after value)
    duplicated: set = field(default_factory=set)  # values read at two offsets

    @property
    def valid(self) -> bool:
        return not (self.out_of_order or self.duplicated)

    def problems(self) -> list[str]:
        out = []
        if self.out_of_order:
            out.append(f"{len(self.out_of_order)} out of publish order: {self.out_of_order[:5]}")
        if self.duplicated:
            out.append(f"{len(self.duplicated)} read twice: {_sample(self.duplicated)}")
        return out


def check_stream_order(ops: Iterable[Op], consumer: str = "consumer-0") -> StreamOrderCheck:
    """Over a stream workload's history (chaos_stream.py): `consumer` reads by offset and
    resumes after the last offset it saw, so its dequeues are in offset order; a publisher
    waits for each confirm before the next send and numbers increase, so each publisher's
    values must be read increasing, and no value twice (lost ones: check_total_queue)."""
    ops = list(ops)
    publisher_of = {o.value: o.process for o in ops if o.f == ENQUEUE}
    reads = [o for o in ops if o.f == DEQUEUE and o.process == consumer and o.value is not None
             and o.type in (OK, INFO)]  # fmt: skip
    reads.sort(key=lambda o: (o.start, o.end))
    result = StreamOrderCheck(read=len(reads))
    last: dict[str, int] = {}
    seen: set = set()
    for o in reads:
        if o.value in seen:
            result.duplicated.add(o.value)
            continue
        seen.add(o.value)
        publisher = publisher_of.get(o.value)
        if publisher is None:
            continue  # unexpected: check_total_queue reports it
        if publisher in last and o.value < last[publisher]:
            result.out_of_order.append((publisher, o.value, last[publisher]))
        last[publisher] = max(o.value, last.get(publisher, o.value))
    return result
