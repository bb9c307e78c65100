"""Holding a quorum queue's publishers while a replica with consumers lags.

A publish is confirmed once the leader and one follower have its entry, but
every replica that hosts consumers applies, stores and delivers every
message itself. When such a replica falls behind the commit, what it has
not applied yet is latency for its consumers, and a publisher that is
confirmed at the majority's pace only makes it grow. So the leader compares
its own count of accepted messages with the count each replica with
consumers reports having applied (`ConsumerLag`), and while the largest
difference exceeds a bound the queue holds its publishers (`PublishHold`):
they get no new link credit until the difference is back under half the
bound. A replica not heard from for `silent_after` seconds (down, cut off)
is left out, so availability stays the quorum's.

Both classes are pure: the caller gives the clock (node/vhosts/quorum_flow.py
carries the reports between nodes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["ConsumerLag", "PublishHold"]


class PublishHold:
    """Whether this replica's queue holds its publishers now (every replica
    has one: the leader decides, the others are told), and who waits for the
    release: publisher links that were refused credit (node/client/links.py)
    and confirms of proxied publishes (node/vhosts/remote_queue.py)."""

    __slots__ = ("held", "_waiting")

    def __init__(self) -> None:
        self.held = False
        # keyed by the callable itself: a link asking again while held waits once
        self._waiting: dict[Callable[[], Any], None] = {}

    def wait(self, fn: Callable[[], Any]) -> None:
        """Run `fn` once the hold is released."""
        self._waiting[fn] = None

    def set(self, held: bool) -> bool:
        """True when that changed anything; a release runs the waiters."""
        if held == self.held:
            return False
        self.held = held
        if not held:
            waiting, self._waiting = self._waiting, {}
            for fn in waiting:
                fn()
        return True

    def deferring(self, confirm: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """`confirm` as one that waits for the release when the hold is on at
        the time it runs: a proxied publisher's node grants credit only while
        its confirms come back (its unconfirmed bound), so holding them holds it."""

        def deferred(outcome: Any) -> None:
            if self.held:
                self.wait(lambda: confirm(outcome))
            else:
                confirm(outcome)

        return deferred


class ConsumerLag:
    """The leader's view of how far its replicas with consumers have applied."""

    __slots__ = ("bound", "silent_after", "_replicas")

    def __init__(self, bound: int, silent_after: float) -> None:
        self.bound = bound  # messages; 0 turns the hold off
        self.silent_after = silent_after
        self._replicas: dict[str, tuple[int, float]] = {}  # node -> (messages applied, when heard)

    def __bool__(self) -> bool:
        return bool(self._replicas)

    def report(self, node: str, applied: int, consumers: bool, now: float) -> None:
        """`node` has applied `applied` accepted messages (the machine's
        `counters.enqueued`, the same on every replica at the same index) and
        hosts consumers or not."""
        if not consumers:
            self._replicas.pop(node, None)
            return
        self._replicas[node] = (applied, now)  # reports travel in order per peer: the last is the newest

    @property
    def nodes(self) -> tuple[str, ...]:
        """The replicas counted now (with consumers, heard from)."""
        return tuple(self._replicas)

    def forget(self, node: str) -> None:
        self._replicas.pop(node, None)

    def lag(self, accepted: int, now: float) -> int:
        """Messages the furthest behind replica heard from lately still has to
        apply, given `accepted` on the leader; replicas silent too long are dropped."""
        worst = 0
        for node, (applied, heard) in list(self._replicas.items()):
            if now - heard > self.silent_after:
                del self._replicas[node]
            elif accepted - applied > worst:
                worst = accepted - applied
        return worst

    def holds(self, accepted: int, now: float, held: bool) -> bool:
        """Whether publishers should be held: over the bound to start, not
        under half of it to go on (so one message does not flip it)."""
        if self.bound <= 0 or not self._replicas:
            return False
        lag = self.lag(accepted, now)
        return lag * 2 >= self.bound if held else lag > self.bound
