"""The leader's Tick timer for one quorum queue: time enters the machine only
through Tick commands, which the leader proposes when something is due.

- TTL: when the head message expires (queries.next_expiry).
- Consumer timeout (timeouts.py): within queues.base.stamp_interval_ms of
  messages being checked out, so that a Tick stamps them, and when the
  oldest stamped one has been held for the timeout. Ticks are version 2
  (TickTimeouts, carrying the leader's effective timeout) once feature flag
  quorum_consumer_timeout is enabled; before that they are version 1, which
  stamps nothing, and nothing times out. Version 3 (TickClock) once feature
  flag quorum_tick_clock is enabled too: the machine's clock is then the
  leader's time of the last tick.

One Tick at a time: while one is proposed and not applied, the commands
applied before it arm nothing (what is due is that Tick's to settle).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from queues.base import stamp_interval_ms

from . import commands as c
from .queries import next_expiry
from .state import QuorumState
from .timeouts import next_timeout

__all__ = ["LeaderTicks"]


class LeaderTicks:
    """`timeout()`: the consumer timeout in force (ms; 0: none), or None while the
    feature flag is off; `tick_clock()`: whether every member reads TickClock;
    `propose(record)`: into the queue's log, True if it was."""

    def __init__(self, host: Any, propose: Callable[[Any], bool], timeout: Callable[[], int | None],
                 tick_clock: Callable[[], bool]) -> None:  # fmt: skip
        self._host = host  # now_ms, call_later
        self._propose = propose
        self._timeout = timeout
        self._tick_clock = tick_clock
        self._timer: Any = None
        self._at: int | None = None
        self._timeout_due: int | None = None  # when the oldest stamped message times out
        self._timeout_known = False  # _timeout_due is up to date for _timeout_of
        self._timeout_of = 0
        self._stamp_due: int | None = None
        self._in_flight = False  # a Tick proposed and not applied yet: it settles what was due

    def arm(self, state: QuorumState, record: Any) -> None:
        """After each command applied on the leader."""
        if self._in_flight:
            if not isinstance(record, c.Tick):
                return  # else every command applied before it lands would propose another
            self._in_flight = False
        due = next_expiry(state)
        timeout = self._timeout()
        if timeout:
            if isinstance(record, c.Tick):
                self._timeout_known = False
                self._stamp_due = None
            if (not self._timeout_known or timeout != self._timeout_of) and state.checked_count:
                self._timeout_due = next_timeout(state, timeout)
                self._timeout_known, self._timeout_of = True, timeout
            if state.unstamped and self._stamp_due is None:
                self._stamp_due = self._host.now_ms() + stamp_interval_ms(timeout)
            for at in (self._timeout_due if state.checked_count else None, self._stamp_due):
                if at is not None and (due is None or at < due):
                    due = at
        if due == self._at:
            return
        self.stop()
        self._at = due
        if due is not None:
            delay = max(0.0, (due - self._host.now_ms()) / 1000)
            self._timer = self._host.call_later(delay + 0.001, self._fire)

    def follower(self) -> None:
        """Not the leader (any more): a later leadership starts from the state."""
        self.stop()
        self._timeout_known = False
        self._stamp_due = None
        self._in_flight = False

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._at = None, None

    def _fire(self) -> None:
        self._timer, self._at = None, None
        timeout = self._timeout()
        now = self._host.now_ms()
        if timeout is None:
            tick = c.Tick(now)
        else:
            tick = (c.TickClock if self._tick_clock() else c.TickTimeouts)(now, timeout)
        self._in_flight = self._propose(tick)
