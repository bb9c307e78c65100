"""How the Raft logs lie in their RocksDB (raft/journal.py's DurableLog, one per
node, and raft/group_journal.py's RaftJournal, one per group): the key
layout and the error a store this Warren cannot read raises."""

from __future__ import annotations

import struct

_FORMAT_KEY = b"\x00format"
_FORMAT = 1
_U64 = struct.Struct(">Q")
_U16 = struct.Struct(">H")
_GROUP = b"g"
_BLOB = b"b"  # a group's side data (quorum queue bodies), outside its journal
_ENTRY = b"e"
_HARD = b"h"
_COMMIT = b"c"
_MAX_GROUP_NAME = (1 << 16) - 1
_IN_FLIGHT_WAIT = 30.0  # seconds flush() waits for a batch another thread is writing


class JournalError(Exception):
    """The Raft log store failed or holds something this Warren cannot read."""


class NotDurable(Exception):
    """The writes a message waited for will not be durable for now (the Raft log
    is out of space): raft/outbound.py drops the messages of that turn, as a lossy
    network would, rather than send an answer for what is not on disk."""
