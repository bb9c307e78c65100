"""Where a replica keeps the bodies of its quorum queue's messages.

Bodies travel once, in the Publish record of the Raft log, each message in
the layout it is stored in (message_format.py: the publisher's bytes as
received, with their routing). When the machine
says a batch is new (the StoreBodies effect), each replica writes them to
the node's Raft RocksDB under (group, message id) (`QuorumHost.put_blob`),
synced by the same fsync as the journal; until that write is flushed the
value stays in memory too, since the store reads back only flushed writes.
The machine's state, and so each snapshot, holds only ids and sizes: when
the log is compacted, bodies below the release cursor are deleted with one
range tombstone (`release_below`).

A restart replays the log after the last snapshot, and with it the Publish
batches whose bodies this replica wrote already: a mark, "bodies written up
to raft index N", is written in the same batch as the bodies (so it is never
ahead of them), and batches at or below it are not written again.

On a replica with consumers attached through its node, deliveries come from
a read-ahead window: the messages of new batches stay in memory after their
write (up to READ_AHEAD_BYTES), already read (the fields the batch's
record holds: the stored bytes are not unpacked a second time for the
delivery), and a delivery the window misses reads the next READ_AHEAD_COUNT
stored messages with one RocksDB iterator, not a get each. A delivery takes
its message out of the window; a redelivery reads the store again.
While the consumers lag by more than the window, new messages are not kept
(the ones kept are delivered first; evicting them for newer ones would make
every delivery a miss), nor while they catch up with read-aheads, until one
reaches the newest stored message; a read-ahead makes room by dropping what
the window holds longest (left behind: settled elsewhere, dropped, or read
for a redelivery).

A replica that installed a snapshot instead of the log that carried some
bodies lacks them: a delivery that needs one waits while it is fetched from
another member (`await_body`), then goes out through `on_arrival`.
"""

from __future__ import annotations

import logging
import struct
from collections import OrderedDict
from collections.abc import Callable

from queues.base import QueueMessage

from .commands import Publish, msg_id
from .host import QuorumHost
from .message_format import pack_message, read_stored

__all__ = ["BodyStore"]

log = logging.getLogger("warren.quorum")

_KEY = struct.Struct(">Q")
# after every message key (8 bytes), below delete_blobs' end (prefix + 9 x ff): kept by release_below
_WRITTEN_MARK = b"\xff" * 8 + b"\x00"
READ_AHEAD_BYTES = 8 << 20  # stored messages kept for this replica's consumers
READ_AHEAD_COUNT = 256  # stored messages read at once when a delivery misses the window


class BodyStore:
    def __init__(self, qh: QuorumHost, group: str, queue_name: str, on_arrival: Callable[[int, tuple], None],
                 has_consumers: Callable[[], bool] = lambda: False) -> None:  # fmt: skip
        self._qh = qh
        self._has_consumers = has_consumers  # consumers attached through this node: keep a window
        # msg id -> (stored size, the stored message or its fields as read_stored gives them), in the
        # order kept (an OrderedDict: dropping the first is O(1), where a dict's first key is found by
        # scanning past every slot popped before it)
        self._window: OrderedDict[int, tuple[int, bytes | tuple]] = OrderedDict()
        self._window_bytes = 0
        # a new message did not fit: the consumers are further behind than the window holds, and
        # new messages are left to the read-aheads until one finds the newest stored message
        self._behind = False
        self._group = group
        self._queue_name = queue_name
        self._on_arrival = on_arrival  # (msg id, the delivery that waited for it)
        self._fresh: dict[int, bytes] = {}  # bodies written but not yet flushed (not readable from the store)
        self._missing: dict[int, list[tuple]] = {}  # bodies to fetch -> the deliveries waiting for them
        self._fetching: set[int] = set()
        self._fetch_due = False  # a _fetch_missing is scheduled for this loop turn
        self._written_to: int | None = None  # the mark (read at the first batch)

    def store_batch(self, record: Publish, index: int) -> None:
        """The messages of the new Publish batch at raft `index` (commands.Publish).
        A PublishBatch's messages are stored as the entry carries them; a
        version 1 Publish's are packed here (message_format.py)."""
        if self._written_to is None:
            mark = self._qh.get_blob(self._group, _WRITTEN_MARK)
            self._written_to = _KEY.unpack(mark)[0] if mark is not None else 0
        if index <= self._written_to:
            return  # replayed after a restart: stored before
        stored = getattr(record, "stored", ())
        if len(stored) != len(record.messages):
            stored = [pack_message(bytes(m[0]), bool(m[1]), m[2], m[3], m[4], m[5], m[6]) for m in record.messages]
        first = msg_id(index, 0)  # a batch's messages have consecutive ids
        fresh = range(first, first + len(stored))
        self._fresh.update(zip(fresh, stored, strict=True))
        pack = _KEY.pack
        self._qh.put_blobs(self._group, [*((pack(mid), value) for mid, value in zip(fresh, stored, strict=True)),
                                         (_WRITTEN_MARK, pack(index))])  # fmt: skip
        self._written_to = index
        self._qh.after_durable(lambda: [self._fresh.pop(m, None) for m in fresh])
        if self._has_consumers() and not self._behind:
            messages = record.messages  # what the machine read: (payload, durable, ttl, exchange, keys, corr, ann)
            self._keep((mid, len(value), (bytes(m[0]), bool(m[1]), m[3], list(m[4]), dict(m[6]) if m[6] else None))
                       for mid, value, m in zip(fresh, stored, messages, strict=True))  # fmt: skip

    def _keep(self, entries, make_room: bool = False) -> None:
        """Add (msg id, stored size, stored message or its fields) to the read-ahead window, in
        order, while they fit in READ_AHEAD_BYTES; `make_room` (a read-ahead: these are the
        messages wanted next) drops what the window held before them to fit them."""
        window = self._window
        held = self._window_bytes
        older = len(window) if make_room else 0  # entries this call may drop (the first ones)
        for mid, size, value in entries:
            if mid in window:
                if make_room:  # wanted next: behind this call's others, no longer among those to drop
                    window.move_to_end(mid)
                    older -= 1
                continue
            while held + size > READ_AHEAD_BYTES and older:
                held -= window.popitem(last=False)[1][0]
                older -= 1
            if held + size > READ_AHEAD_BYTES and window:
                self._behind = self._behind or not make_room
                break  # the rest are read from the store when wanted
            window[mid] = (size, value)
            held += size
        self._window_bytes = held

    def forget(self, msg_ids) -> None:
        """These messages are settled (by a consumer on any node): out of the window."""
        window = self._window
        if window:
            for mid in msg_ids:
                held = window.pop(mid, None)
                if held is not None:
                    self._window_bytes -= held[0]

    def _read_ahead(self, mid: int) -> bytes | None:
        """The stored message `mid`, read with the ones after it into the window."""
        found = self._qh.get_blobs_from(self._group, _KEY.pack(mid), READ_AHEAD_COUNT)
        if not found or found[0][0] != _KEY.pack(mid):
            return None
        if len(found) < READ_AHEAD_COUNT:
            self._behind = False  # caught up with the store: new messages are kept again
        self._keep(((_KEY.unpack(k)[0], len(v), v) for k, v in found[1:]), make_room=True)
        return found[0][1]

    @property
    def held_bytes(self) -> int:
        """Bodies kept in memory until their write is flushed (the memory alarm counts them)."""
        return sum(len(v) for v in self._fresh.values())

    def body(self, mid: int) -> bytes | None:
        """The stored message (message_format.py), or None when this replica lacks it."""
        value = self._fresh.get(mid)
        return value if value is not None else self._qh.get_blob(self._group, _KEY.pack(mid))

    def message(self, mid: int, delivery_count: int = 0, redelivered: bool = False,
                annotations: dict | None = None) -> QueueMessage | None:  # fmt: skip
        """The message to hand to a link, or None when this replica lacks its body."""
        held = self._window.pop(mid, None)
        if held is not None:
            self._window_bytes -= held[0]
            value = held[1]
        else:
            value = self._fresh.get(mid)
            if value is None:
                value = self._read_ahead(mid) if self._has_consumers() else self.body(mid)
                if value is None:
                    return None
        fields = value if type(value) is tuple else read_stored(value)
        payload, durable, exchange, routing_keys, stored = fields
        if stored and annotations:
            annotations = {**stored, **annotations}  # what a Modify merged wins
        return QueueMessage(mid, payload, durable, None, delivery_count, redelivered, exchange,
                            routing_keys, annotations or stored)  # fmt: skip

    def release_below(self, raft_index: int) -> None:
        """The log below `raft_index` is compacted and no live message came from it."""
        below = msg_id(raft_index, 0)
        for mid in [m for m in self._window if m < below]:
            self._window_bytes -= self._window.pop(mid)[0]
        self._qh.delete_blobs(self._group, _KEY.pack(msg_id(raft_index, 0)))

    # -- bodies this replica lacks ----------------------------------------------------

    def await_body(self, mid: int, delivery: tuple) -> None:
        """`delivery` goes out through `on_arrival` once the body of `mid` is here."""
        # one fetch per loop turn for what is missing and not being fetched already: a body
        # missed while an earlier fetch is out is asked for on its own, not left waiting
        if not self._fetch_due and mid not in self._fetching:
            self._fetch_due = True
            self._qh.call_soon(self._fetch_missing)
        self._missing.setdefault(mid, []).append(delivery)

    def _fetch_missing(self) -> None:
        self._fetch_due = False
        wanted = [m for m in self._missing if m not in self._fetching]
        if wanted:
            self._fetching.update(wanted)
            self._qh.fetch_bodies(self._group, wanted, self._arrived)

    def _arrived(self, bodies: dict[int, bytes], asked: list[int]) -> None:
        self._fetching.difference_update(asked)
        for mid, value in bodies.items():
            self._qh.put_blob(self._group, _KEY.pack(mid), value)
            self._fresh[mid] = value
        self._qh.after_durable(lambda: [self._fresh.pop(m, None) for m in bodies])
        for mid in asked:
            waiting = self._missing.pop(mid, [])
            if mid not in bodies:
                if waiting:
                    log.error("quorum queue %s: no member has the body of message %d", self._queue_name, mid)
                continue
            for delivery in waiting:
                self._on_arrival(mid, delivery)


