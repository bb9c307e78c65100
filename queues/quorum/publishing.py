"""The publishes of one loop turn become one Publish record (PublishBatch:
each message packed once, here, in the layout every replica stores).

A quorum queue takes publishes one by one from the node's links but proposes
them per loop turn: one log entry, one fsync on each member and one round
trip for the lot. Each batch is numbered (publisher, seq) so that the
machine applies it once however often it is proposed (dedup.py); the
publisher is unique per queue object, so a queue started again (a membership
change) never reuses a sequence.
"""

from __future__ import annotations

import itertools
from typing import Any

from queues.base import ConfirmCallback, Outcome, QueueMessage

from .commands import Publish, PublishBatch, PublishPrioritised
from .effects import Confirm
from .host import QuorumHost
from .proposals import Proposer

__all__ = ["PublishBatcher"]

_QUEUE_OBJECTS = itertools.count(1)


class PublishBatcher:
    def __init__(self, qh: QuorumHost, clock: Any, proposer: Proposer) -> None:
        self._qh = qh
        self._clock = clock  # the vhost: now_ms()
        self._proposer = proposer
        self.publisher = f"{qh.incarnation}/{next(_QUEUE_OBJECTS)}"
        self._seq = itertools.count(1)
        self._batch: list[list] = []  # publishes of this loop turn
        self._confirms: list[ConfirmCallback | None] = []

    def add(self, message: QueueMessage, confirm: ConfirmCallback | None) -> None:
        if not self._batch:
            self._qh.call_soon(self._flush)
        ttl = None if message.expires_at is None else max(0, message.expires_at - self._clock.now_ms())
        corr = len(self._batch) if confirm is not None else None
        self._batch.append((message.payload, message.durable, ttl, message.exchange, tuple(message.routing_keys), corr,
                            message.annotations or None))  # fmt: skip
        self._confirms.append(confirm)

    def _flush(self) -> None:
        batch, confirms = self._batch, self._confirms
        self._batch, self._confirms = [], []
        if not batch:
            return

        def committed(effects: Any) -> None:
            done = set()
            for effect in effects or ():
                if isinstance(effect, Confirm):
                    for corr in effect.correlations:
                        if corr is not None and confirms[corr] is not None and corr not in done:
                            done.add(corr)
                            confirms[corr](Outcome.ACCEPTED if effect.outcome is Outcome.ACCEPTED
                                           else Outcome.REJECTED)  # fmt: skip
            for corr, confirm in enumerate(confirms):
                if confirm is not None and corr not in done:
                    confirm(Outcome.RELEASED)  # the queue was deleted under it

        now, seq = self._clock.now_ms(), next(self._seq)
        if self._qh.packs_publishes():  # version 3: priorities read as in version 2
            record = PublishBatch.of(batch, now, self.publisher, seq)
        elif self._qh.priorities():  # a member may not read version 3 yet (a rolling upgrade)
            record = PublishPrioritised(tuple(batch), now, self.publisher, seq)
        else:
            record = Publish(tuple(batch), now, self.publisher, seq)
        self._proposer.submit(record, committed)
