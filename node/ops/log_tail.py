"""The last lines of the node's log, for `warren ctl log_tail` (rabbitmq-diagnostics
log_tail): read backwards from the end of the log file, a bounded number of
bytes whatever the file's size (RabbitMQ's rabbit_log_tail reads backwards
too), or kept in memory when the node logs to its console only."""

from __future__ import annotations

import logging
import os
from collections import deque

MAX_LINES = 1000  # the most lines one request may ask for; also what the memory keeps
MAX_BYTES = 4 * 1024 * 1024  # read from the end of the file at most, for those lines
_BLOCK = 64 * 1024


class RecentLines(logging.Handler):
    """An output that keeps the last MAX_LINES formatted lines in memory."""

    def __init__(self, size: int = MAX_LINES):
        super().__init__()
        self._lines: deque[str] = deque(maxlen=size)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        self._lines.append(line)  # emit runs under the handler's lock (Handler.handle)

    def tail(self, lines: int) -> list[str]:
        with self.lock:  # type: ignore[union-attr]  # a Handler's lock exists once constructed
            kept = list(self._lines)
        return kept[-lines:] if lines > 0 else []


def tail_file(path: str, lines: int, max_bytes: int = MAX_BYTES) -> list[str]:
    """The last `lines` lines of the file, reading at most `max_bytes` from its end
    (fewer lines when they are longer than that); [] when there is no file. Blocking:
    call it off the event loop."""
    if lines <= 0:
        return []
    try:
        f = open(path, "rb")  # noqa: SIM115 (closed below, after the loop that reads it)
    except FileNotFoundError:
        return []
    with f:
        end = pos = f.seek(0, os.SEEK_END)  # the end now: lines written meanwhile are not read
        chunks: list[bytes] = []
        newlines = 0
        # lines + 1 newlines: the first of the wanted lines is then whole
        while pos > 0 and newlines <= lines and end - pos < max_bytes:
            step = min(_BLOCK, pos, max_bytes - (end - pos))
            pos -= step
            f.seek(pos)
            chunk = f.read(step)
            chunks.append(chunk)
            newlines += chunk.count(b"\n")
    data = b"".join(reversed(chunks))
    if not data:
        return []
    parts = data.split(b"\n")
    if data.endswith(b"\n"):
        parts.pop()  # nothing after the last newline
    if pos > 0:
        parts = parts[1:]  # the part before the first newline read may be a line's end
    return [p.decode("utf-8", "replace") for p in parts[-lines:]]
