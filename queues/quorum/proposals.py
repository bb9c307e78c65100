"""Getting commands into a quorum queue's log, whatever the leader does.

Every command is proposed until the group takes it: a leader change, a
forward lost with its stream, or no answer within RESUBMIT_AFTER only delay
it. Retrying is safe because the machine applies each Publish batch once
(queues/quorum/dedup.py) and its other commands are idempotent. The
commands of one consumer link go through a ConsumerPipeline, which keeps
them in the order the link sent them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from raft.status import ProposalOutcome

from .commands import Detach
from .host import QuorumHost

__all__ = ["RESUBMIT_AFTER", "RETRY_MAX", "RETRY_MIN", "ConsumerPipeline", "Proposer"]

RETRY_MIN, RETRY_MAX = 0.05, 1.0  # seconds between proposals of a command the group did not take
RESUBMIT_AFTER = 5.0  # seconds without an answer before a proposal is made again


class Proposer:
    """Proposes the commands of one queue replica to its group. `clock` gives
    `call_later(delay, fn)` (the vhost). Once `stop()`ped (the queue was
    deleted), a proposal that fails counts as done instead of being retried."""

    def __init__(self, qh: QuorumHost, group: str, clock: Any) -> None:
        self._qh = qh
        self._group = group
        self.clock = clock
        self.stopped = False
        self.pipelines: dict[str, ConsumerPipeline] = {}  # consumer id -> its commands in flight
        self._barriers: list[tuple[list[list], Callable[[], None]]] = []
        self._held: list[tuple[Any, Callable[[Any, int], None]]] = []  # proposals waiting for a leader

    def stop(self) -> None:
        self.stopped = True
        barriers, self._barriers = self._barriers, []
        for _, fn in barriers:
            fn()

    def after_consumers(self, fn: Callable[[], None]) -> None:
        """Run `fn` once every consumer command sent so far is applied: a
        purge must see the messages a closed consumer returned (its Detach
        is still in its pipeline when the purge request arrives)."""
        pending = [e for p in self.pipelines.values() for e in p.entries if not e[2]]
        if not pending or self.stopped:
            fn()
        else:
            self._barriers.append((pending, fn))

    def _entry_applied(self) -> None:
        ready = [b for b in self._barriers if all(e[2] for e in b[0])]
        if ready:
            self._barriers = [b for b in self._barriers if b not in ready]
            for _, fn in ready:
                fn()

    def submit(self, record: Any, on_applied: Callable[[list], None] | None = None, delay: float = RETRY_MIN) -> None:
        """Propose `record` until the group takes it; `on_applied(effects)`
        runs once it is applied here."""

        def done(result: Any, outcome: ProposalOutcome | None) -> None:
            if outcome is ProposalOutcome.SUCCESS or self.stopped:
                if on_applied is not None:
                    on_applied(result if outcome is ProposalOutcome.SUCCESS and isinstance(result, list) else [])
            else:
                self.clock.call_later(delay, lambda: self.submit(record, on_applied, min(delay * 2, RETRY_MAX)))

        self.propose(record, done)

    def propose(self, record: Any, done: Callable[[Any, int], None]) -> None:
        """One proposal; `done(result, outcome)` once, a lost answer reported as outcome None.
        While the group has no leader (a new group electing its first), proposals
        wait here in the order they came: one that failed and was retried would
        otherwise land after later ones of other links (a single active consumer
        must be the first that attached, as in RabbitMQ)."""
        if self._held or (self._qh.leader_of(self._group) is None and not self.stopped):
            self._held.append((record, done))
            if len(self._held) == 1:
                self.clock.call_later(RETRY_MIN, self._release_held)
            return
        self._propose_now(record, done)

    def _release_held(self) -> None:
        if self._qh.leader_of(self._group) is None and not self.stopped:
            self.clock.call_later(RETRY_MIN, self._release_held)
            return
        held, self._held = self._held, []
        for record, done in held:
            self._propose_now(record, done)

    def _propose_now(self, record: Any, done: Callable[[Any, int], None]) -> None:
        answered = False

        def answer(result: Any, outcome: ProposalOutcome | None) -> None:
            nonlocal answered
            if not answered:  # else a late answer after the watchdog gave up on it
                answered = True
                watchdog.cancel()
                done(result, outcome)

        def no_answer() -> None:
            # a forward lost with its stream while the leader stayed the same gets no answer at all
            answer(None, None)

        watchdog = self.clock.call_later(RESUBMIT_AFTER, no_answer)
        if not self._qh.submit(self._group, record, answer):
            answer(None, None)

    def for_consumer(self, cid: str, record: Any) -> None:
        """A command of consumer link `cid`, applied after the ones it sent before."""
        pipeline = self.pipelines.get(cid)
        if pipeline is None:
            pipeline = self.pipelines[cid] = ConsumerPipeline(self)
        pipeline.send(record)

    def detaching(self, cid: str) -> bool:
        """A Detach is the last command in flight for `cid`."""
        pipeline = self.pipelines.get(cid)
        return pipeline is not None and bool(pipeline.entries) and isinstance(pipeline.entries[-1][0], Detach)


class ConsumerPipeline:
    """The commands of one consumer link, applied in the order it sent them.

    They are proposed at once, one after the other; when one fails (a leader
    change), it and every later one, applied or not, are proposed again in
    order. Each is safe to apply twice, and the order of the last
    applications is the link's own: a stale Credit never lands after a newer
    one (which would shrink the credit under a waiting receiver), a retried
    Attach never after its Detach."""

    def __init__(self, proposer: Proposer):
        self.proposer = proposer
        self.entries: list[list] = []  # [record, generation, applied], oldest first
        self.delay = RETRY_MIN

    def send(self, record: Any) -> None:
        entry = [record, 0, False]
        self.entries.append(entry)
        self._propose(entry)

    def _propose(self, entry: list) -> None:
        generation = entry[1]

        def done(result: Any, outcome: ProposalOutcome | None) -> None:
            if entry[1] != generation or entry not in self.entries:
                return  # proposed again since, or dropped
            if outcome is ProposalOutcome.SUCCESS or self.proposer.stopped:
                entry[2] = True
                while self.entries and self.entries[0][2]:
                    self.entries.pop(0)
                self.delay = RETRY_MIN
                if not self.entries and isinstance(entry[0], Detach):  # the link's last word
                    self.proposer.pipelines.pop(entry[0].consumer_id, None)
                self.proposer._entry_applied()
            else:
                self._again_from(entry)

        self.proposer.propose(entry[0], done)

    def _again_from(self, entry: list) -> None:
        later = self.entries[self.entries.index(entry):]
        for e in later:
            e[1] += 1
            e[2] = False
        delay, self.delay = self.delay, min(self.delay * 2, RETRY_MAX)

        def again() -> None:
            for e in later:
                if e in self.entries and not self.proposer.stopped:
                    self._propose(e)

        self.proposer.clock.call_later(delay, again)
