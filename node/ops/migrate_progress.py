"""How `warren migrate` shows its shovels' progress: per queue, the messages
left in RabbitMQ, the messages moved and the rate. In a terminal one block of
lines with a bar each, redrawn in place; otherwise (a log, a pipe) plain
lines, one per queue per report, that a script can read."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TextIO

BAR = 30  # characters


@dataclass
class QueueProgress:
    vhost: str
    name: str
    initial: int  # messages in RabbitMQ when its shovel was made
    left: int = 0  # messages in RabbitMQ now (its statistics lag by seconds)
    moved: int = 0  # the shovel's `forwarded`: confirmed by Warren
    state: str = "starting"
    reason: str = ""
    rate: float = 0.0  # messages a second, over the last report
    _last: tuple[float, int] | None = field(default=None, repr=False)

    def update(self, left: int, moved: int, state: str, reason: str, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if self._last is not None and now > self._last[0]:
            self.rate = max(0, moved - self._last[1]) / (now - self._last[0])
        self._last = (now, moved)
        self.left, self.moved, self.state, self.reason = left, moved, state, reason

    @property
    def label(self) -> str:
        return self.name if self.vhost == "/" else f"{self.vhost}/{self.name}"


def _bar(p: QueueProgress) -> str:
    total = p.moved + p.left
    done = BAR if total == 0 else int(BAR * p.moved / total)
    return "[" + "#" * done + "." * (BAR - done) + "]"


def line(p: QueueProgress) -> str:
    text = f"{p.label}: {p.left} left, {p.moved} moved, {p.rate:.0f} msg/s, shovel {p.state}"
    return text + (f" ({p.reason})" if p.reason else "")


class Display:
    """Writes reports to `out`; `tty` (default: out.isatty()) picks the bars."""

    def __init__(self, out: TextIO, tty: bool | None = None):
        self.out = out
        self.tty = out.isatty() if tty is None else tty
        self._drawn = 0  # lines of the last block, to go back over

    def report(self, queues: list[QueueProgress]) -> None:
        if self.tty:
            if self._drawn:
                self.out.write(f"\x1b[{self._drawn}A")  # cursor up: redraw the block in place
            for p in queues:
                self.out.write(f"\x1b[2K{_bar(p)} {line(p)}\n")
            self._drawn = len(queues)
        else:
            for p in queues:
                self.out.write("progress " + line(p) + "\n")
        self.out.flush()

    def say(self, text: str) -> None:
        self._drawn = 0  # what follows starts below the block
        self.out.write(text + "\n")
        self.out.flush()
