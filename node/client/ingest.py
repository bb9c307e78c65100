"""How many bytes one client connection may make the node take in per loop turn.

The event loop reads every readable socket each turn, and uvloop (libuv)
reads it again, up to 32 times, while each read fills its 256 KB buffer: a
client streaming large messages has megabytes taken in per turn (ten 1 MB
messages within two turns, tests/node/client/test_hostile_big_ingest.py), so
the node's core spends most of each turn on its bytes while clients of small
messages share what is left (issue 14, row 6: a pair of small-message
clients kept 0.63 of its rate beside a client pushing 15 MB messages at
280 MB/s).

`IngestBudget` gives each connection `per_turn` bytes a turn. Bytes read are
owed; every later turn pays `per_turn` of the debt (one callback a turn,
scheduled only while something is owed). A connection owing more than one
turn's budget stops being read (`pause_reading`) until it owes nothing, then
is read again. Over any span of turns a connection so takes at most
`per_turn` bytes a turn, plus one budget and one read: fair in bytes between
connections whatever their senders do, and free when nothing else runs,
since the loop then just turns faster (the paused turns do no I/O wait).
"""

from __future__ import annotations

import asyncio


class IngestBudget:
    def __init__(self, loop: asyncio.AbstractEventLoop, transport: asyncio.Transport, per_turn: int):
        self.loop = loop
        self.transport = transport
        self.per_turn = per_turn
        self.ingested = 0  # bytes taken in since the connection opened
        self.paused_turns = 0  # loop turns this connection was not read for (tests read it)
        self._owed = 0
        self._paying = False  # a turn callback is scheduled
        self._paused = False
        self._stopped = False

    def took(self, size: int) -> None:
        """The connection has just taken in `size` bytes."""
        self.ingested += size
        self._owed += size
        if not self._paying and not self._stopped:
            self._paying = True
            self.loop.call_soon(self._turn)
        if self._owed > self.per_turn and not self._paused and not self._stopped and not self.transport.is_closing():
            self._paused = True
            self.transport.pause_reading()

    def stop(self) -> None:
        """The connection is gone: nothing more to pause or resume."""
        self._stopped = True

    def _turn(self) -> None:
        """Runs once a turn (call_soon runs on the next turn) while bytes are owed."""
        self._paying = False
        if self._stopped:
            return
        if self._paused:
            self.paused_turns += 1
        self._owed = max(0, self._owed - self.per_turn)
        if self._owed > 0:
            self._paying = True
            self.loop.call_soon(self._turn)
            return
        if self._paused:
            self._paused = False
            if not self.transport.is_closing():
                self.transport.resume_reading()
