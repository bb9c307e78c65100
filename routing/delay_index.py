"""The delayed messages of one x-delayed-message exchange, ordered by due time:
a pure state machine (no I/O, no clock: time comes in as arguments), in the
style of the quorum queues' machine, that the host (node/vhosts/delayed_messages.py)
drives with `apply` and asks what is due.

Each message is known by a reference (`ref`, the host's key for its stored body)
and its due time (ms). Bodies are never here, and at most `window` entries are
kept in memory: the earliest due. The others are only counted (`spilled`) and
stay on disk, in the host's index (due time and reference, no body), until the
window has run dry, when the host reloads the earliest `window` of them
(`Reload`, from `needs_reload`). The window holds only messages due no later
than every spilled one, so what is due first is always in memory:

- Delay(ref, due): a new message. Into the window while it has room and nothing
  is spilled, or when it is due before the window's last entry (that last entry
  is then spilled if the window overflows); else spilled.
- Routing(refs): the host took these due messages out of the window to route
  them; they stay counted (`in_flight`) until Routed, and a Reload skips them.
- Routed(refs): the targets confirmed them: gone for good.
- Retry(refs): routing failed (a target refused it, or lost it): back into the
  window with their due times, to be tried again.
- Reload(entries): every stored (due, ref) not in flight, when `needs_reload`;
  the earliest `window` of them become the window, the rest stay spilled.

So memory is bounded by the window and the messages in flight, whatever the
number of pending delays: a million delayed messages cost `window` entries.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Delay", "DelayIndex", "Reload", "Retry", "Routed", "Routing"]

DEFAULT_WINDOW = 10_000


@dataclass(frozen=True, slots=True)
class Delay:
    ref: int
    due: int


@dataclass(frozen=True, slots=True)
class Routing:
    refs: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Routed:
    refs: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Retry:
    entries: tuple[tuple[int, int], ...]  # (due, ref)


@dataclass(frozen=True, slots=True)
class Reload:
    entries: tuple[tuple[int, int], ...]  # (due, ref): every stored message not in flight


Command = Delay | Routing | Routed | Retry | Reload


class DelayIndex:
    def __init__(self, window: int = DEFAULT_WINDOW):
        if window < 1:
            raise ValueError("window must be at least 1")
        self.window_size = window
        self._window: list[tuple[int, int]] = []  # (due, ref), sorted
        self.spilled = 0  # stored messages not in the window nor in flight
        self._in_flight: dict[int, int] = {}  # ref -> due

    # ------------------------------------------------------------ reads

    def __len__(self) -> int:
        """Every delayed message: in the window, spilled or in flight."""
        return len(self._window) + self.spilled + len(self._in_flight)

    @property
    def in_memory(self) -> int:
        return len(self._window) + len(self._in_flight)

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def is_in_flight(self, ref: int) -> bool:
        return ref in self._in_flight

    def next_due(self) -> int | None:
        """When the earliest message in memory is due, or None."""
        return self._window[0][0] if self._window else None

    def due(self, now: int, limit: int) -> list[tuple[int, int]]:
        """Up to `limit` (due, ref) with due <= now, earliest first (read only:
        `apply(Routing(...))` takes them)."""
        end = bisect.bisect_right(self._window, (now, float("inf")))
        return self._window[: min(end, limit)]

    @property
    def needs_reload(self) -> bool:
        return not self._window and self.spilled > 0

    # ------------------------------------------------------------ apply

    def apply(self, command: Command) -> None:
        if isinstance(command, Delay):
            self._add(command.due, command.ref)
        elif isinstance(command, Routing):
            taken = set(command.refs)
            kept = []
            for due, ref in self._window:
                if ref in taken:
                    self._in_flight[ref] = due
                else:
                    kept.append((due, ref))
            self._window = kept
        elif isinstance(command, Routed):
            for ref in command.refs:
                self._in_flight.pop(ref, None)
        elif isinstance(command, Retry):
            for due, ref in command.entries:
                if self._in_flight.pop(ref, None) is not None:
                    self._add(due, ref)
        elif isinstance(command, Reload):
            entries = [e for e in command.entries if e[1] not in self._in_flight]
            self._window = heapq.nsmallest(self.window_size, entries)
            self.spilled = len(entries) - len(self._window)
        else:
            raise TypeError(f"not a delay index command: {command!r}")

    def _add(self, due: int, ref: int) -> None:
        window = self._window
        if not window and self.spilled:
            self.spilled += 1  # the window is due a reload, which will find it on disk
        elif len(window) < self.window_size and not self.spilled:
            bisect.insort(window, (due, ref))
        elif window and (due, ref) < window[-1]:
            bisect.insort(window, (due, ref))
            if len(window) > self.window_size:
                window.pop()  # the latest goes to disk only: still no earlier than every other spilled one
                self.spilled += 1
        else:
            self.spilled += 1

    def load(self, entries: Iterable[tuple[int, int]]) -> None:
        """At start: every stored (due, ref)."""
        self.apply(Reload(tuple(entries)))
