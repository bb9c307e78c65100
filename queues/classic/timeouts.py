"""The consumer timeout of a classic queue: a message a consumer holds
unsettled longer than the timeout goes back to the queue (like a release: not
a failed delivery), and the consumer gets nothing more (CreditFlow keeps it out
of service) and is told (`Consumer.timed_out`, which ends its link).

The timeout is x-consumer-timeout (the smaller of the queue's own and a
policy's, routing/policies.py), else the node setting consumer_timeout; 0:
none. It is the same rule as the quorum queue's (queues/quorum/timeouts.py),
measured the same way: while consumers hold messages a check runs every
`stamp_interval_ms(timeout)` (a twentieth of it, 1 s to 1 minute), stamping
the messages it sees held for the first time, so the delivery path costs
nothing and a timeout is late by at most that interval. The stamps are the
host's monotonic clock (as RabbitMQ's are), not the wall clock, which NTP or
an operator may step (the quorum queue's must be its log's wall-clock stamps).
"""

from __future__ import annotations

from typing import Any

from queues.base import consumer_timeout_of, consumer_timeout_text, stamp_interval_ms

from .flow import ConsumerState

__all__ = ["ConsumerTimeouts"]


class ConsumerTimeouts:
    def __init__(self, queue: Any, node_timeout: int) -> None:
        self.queue = queue  # the ClassicQueue
        self._node_timeout = max(0, node_timeout)
        self.timeout = self._node_timeout  # in force, ms; 0: none
        self._timer: Any = None
        self._stamps: dict[int, int] = {}  # seq of a delivered message -> first seen held (ms)
        self.configure(queue.effective_arguments)

    def configure(self, arguments: dict) -> None:
        """From the queue's effective arguments; raises QueueArgumentError. (Not part of
        ClassicQueueConfig: the metadata machine checks that one, and a check it gains would
        refuse there what a member of an older version accepts.)"""
        own = consumer_timeout_of(arguments)
        self.timeout = self._node_timeout if own is None else own

    def requeued(self, seq: int) -> None:
        """Back in the queue (released, modified, detached): its next delivery is held anew."""
        self._stamps.pop(seq, None)

    def watch(self) -> None:
        """Consumers hold messages: checks run until none does."""
        if self._timer is None:
            self._timer = self.queue._host.call_later(stamp_interval_ms(self.timeout) / 1000, self._check)

    def _check(self) -> None:
        self._timer = None
        queue = self.queue
        if queue.deleted or not self.timeout:
            self._stamps = {}
            return
        now = queue._host.monotonic_ms()  # a duration: a stepped wall clock must not move it
        limit = now - self.timeout
        seen, stamps = self._stamps, {}  # rebuilt from what is held: settled ones drop out
        late: list[tuple[ConsumerState, list[int]]] = []
        for cs in queue._flow.consumers.values():
            over = []
            for seq in cs.unacked:
                since = stamps[seq] = seen.get(seq, now)
                if since <= limit:
                    over.append(seq)
            if over:
                late.append((cs, over))
        self._stamps = stamps
        if late:
            self._time_out(late)
        if queue._unacked_count and not queue.deleted:
            self.watch()

    def _time_out(self, late: list[tuple[ConsumerState, list[int]]]) -> None:
        queue = self.queue
        for cs, seqs in late:
            for seq in seqs:
                msg = cs.unacked.pop(seq)
                queue._unacked_count -= 1
                queue._unacked_bytes -= msg.size
                queue._requeue(msg, changed=False)
            cs.timed_out = True
            queue._flow.deactivate(cs)
        queue._dispatch()
        text = consumer_timeout_text(queue, self.timeout)
        for cs, _ in late:  # after the state is settled: ending a link detaches it from the queue
            if queue._flow.consumers.get(id(cs.consumer)) is cs:
                cs.consumer.timed_out(text)
