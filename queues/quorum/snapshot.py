"""The quorum queue state as bytes: indexes and metadata only, never bodies.

    magic "WQQS" | format u16 | machine version u16 | crc32 u32 (of what follows)
             | meta length u32
    meta     AMQP value (amqp/codec.py):
             [config, last_index, clock, counters, consumers, service, sac_active,
              publishers, prio_turn, tick_clock]
             config     QuorumConfig fields in declaration order
             counters   Counters slots in order
             consumers  [[id, priority, node, delivery_count, credit, settled, in_service,
                          timed_out], ...] in attach order
             service    [[priority, [consumer id, ...]], ...] highest priority
                        first, each level in round-robin order
             publishers [[publisher, low, [seq above low, ...],
                          [[seq, [[outcome, [correlation, ...]], ...]], ...]], ...]
                        by publisher, seqs ascending (state.PublisherState)
    then, little-endian columns: the returned messages (a message section,
             by id), the ready section, the high-priority ready section, a
             message section per consumer for
             its checked-out messages (consumers in attach order, messages
             in delivery order), each followed by its stamps (n u32 | the
             first n of those messages' `since` n*i64), the dlx holding (a message section with a
             reason column), then the live index counts.

    message section: n u32 | flags u8 | ids n*u64 | sizes n*u32
             | expiry n*i64 (-1 = none)   if flags & 1
             | delivery_count n*u32       if flags & 2
             | acquired n*u32             if flags & 4
             | u32 length + AMQP [[position, annotations], ...]  if flags & 8
             | reason n*u8 (effects.REASONS) if flags & 16
    ready section (ready.py's runs, as the state holds them):
             runs u32 | messages u32 | first ids runs*u64 | counts runs*u32
             | expiries runs*i64 (-1 = none) | sizes messages*u32
    live section: n u32 | raft indexes n*u64 | counts n*u32 (counts > 0)

Columns a section does not need are left out; a ready message costs its
4-byte size plus its share of a 20-byte run (one per Enqueue batch, as a
rule). Deterministic: equal states give equal bytes (the return heap is
written sorted, ready runs are maximal).

Versioned twice, as the metadata machine's snapshot is: SNAPSHOT_FORMAT for
this layout, and the machine version (state.MACHINE_VERSION) of what wrote
it. A layout or a machine version newer than this build's is refused
(SnapshotFormatError), never guessed at; a new layout is a new
SNAPSHOT_FORMAT and `restore` keeps reading the old ones:

    format 5  as format 6, without tick_clock; still written while no TickClock was
              applied (the flag quorum_tick_clock off)
    format 4  as format 5, without timed_out and the stamps; still written
              while no consumer is stamped or timed out (the flag
              quorum_consumer_timeout off), which earlier versions read
    format 3  as format 4, without the high-priority ready section and prio_turn
    format 2  the ready messages as a message section (12 B each) instead
              of runs
    format 1  as format 2, the header without the machine version (machine
              version 1), the meta without publishers
    format 0  (no magic) what the host wrote before the publish dedup tables
              moved into the machine: the AMQP value
              [1, publishers, format 1 snapshot], publishers as above with
              outcomes as [outcome, [correlation, ...]] pairs
"""

from __future__ import annotations

import gc
import struct
import sys
import zlib
from array import array
from collections import deque
from itertools import repeat
from operator import itemgetter
from typing import Any

from amqp import codec

from .effects import REASONS
from .live import LiveIndexes
from .ready import ReadyList
from .state import MACHINE_VERSION, ConsumerState, Counters, PublisherState, QuorumConfig, QuorumState

__all__ = ["SNAPSHOT_FORMAT", "SnapshotFormatError", "restore", "snapshot_bytes"]

MAGIC = b"WQQS"
SNAPSHOT_FORMAT = 6
_HEAD = struct.Struct("<4sHHII")  # magic, format, machine version, crc, meta length
_HEAD_V1 = struct.Struct("<4sHII")  # format 1: no machine version
_LEGACY_HOST_FORMAT = 1  # format 0's outer list
_U32 = struct.Struct("<I")
_U16 = struct.Struct("<H")
_SECTION = struct.Struct("<IB")
_READY = struct.Struct("<II")  # runs, messages
_SWAP = sys.byteorder != "little"
_REASON_CODE = {r: i for i, r in enumerate(REASONS)}
_GETTERS = tuple(itemgetter(i) for i in range(6))  # the message tuple's fields (state.M_*)


class SnapshotFormatError(ValueError):
    """Bytes that are not a quorum queue snapshot this build can read."""


def _col(typecode: str, values: Any) -> bytes:
    a = array(typecode, values)
    if _SWAP:
        a.byteswap()
    return a.tobytes()


def _pack_msgs(parts: list[bytes], msgs: Any, reasons: list[str] | None = None) -> None:
    n = len(msgs)
    if not n:
        parts.append(_SECTION.pack(0, 0))
        return
    # Column by column: list(map(itemgetter)) is several times faster than
    # zip(*msgs) on a million tuples.
    ids, sizes, exps, dcs, acqs, anns = (list(map(getter, msgs)) for getter in _GETTERS)
    flags = 0
    cols = [_col("Q", ids), _col("I", sizes)]
    if exps.count(None) != n:
        flags |= 1
        cols.append(_col("q", [-1 if e is None else e for e in exps]))
    if any(dcs):
        flags |= 2
        cols.append(_col("I", dcs))
    if any(acqs):
        flags |= 4
        cols.append(_col("I", acqs))
    if anns.count(None) != n:
        flags |= 8
        data = codec.dumps([[i, a] for i, a in enumerate(anns) if a is not None])
        cols.append(_U32.pack(len(data)) + data)
    if reasons is not None:
        flags |= 16
        cols.append(_col("B", [_REASON_CODE[r] for r in reasons]))
    parts.append(_SECTION.pack(n, flags))
    parts.extend(cols)


def _pack_ready(parts: list[bytes], ready: ReadyList) -> None:
    runs = list(ready.runs())
    sizes = ready.sizes()
    parts.append(_READY.pack(len(runs), len(sizes)))
    parts.append(_col("Q", (r[0] for r in runs)))
    parts.append(_col("I", (r[1] for r in runs)))
    parts.append(_col("q", (r[2] for r in runs)))
    if _SWAP:
        sizes.byteswap()
    parts.append(sizes.tobytes())


def snapshot_bytes(state: QuorumState) -> bytes:
    """The whole state (no bodies) as deterministic, versioned bytes."""
    # format 4 while no consumer was stamped (feature flag quorum_consumer_timeout off): the
    # layout members of earlier versions read, so a leader can still send them a snapshot
    timeouts = state.tick_clock or any(cs.since or cs.timed_out for cs in state.consumers.values())
    consumers = [
        [cs.consumer_id, cs.priority, cs.node, cs.delivery_count, cs.credit, cs.settled, cs.in_service]
        + ([cs.timed_out] if timeouts else [])
        for cs in state.consumers.values()
    ]
    service = [[prio, [cs.consumer_id for cs in state.service[prio]]] for prio in state.prios]
    meta = codec.dumps([
        state.config.as_list(),
        state.last_index,
        state.clock,
        state.counters.as_list(),
        consumers,
        service,
        state.sac_active,
        [[p, ps.low, sorted(ps.above), [[seq, [[o, list(corrs)] for o, corrs in confirms]]
                                        for seq, confirms in sorted(ps.outcomes.items())]]
         for p, ps in sorted(state.publishers.items())],
        state.prio_turn,
    ] + ([True] if state.tick_clock else []))  # fmt: skip
    parts = [meta]
    _pack_msgs(parts, sorted(state.returned))
    _pack_ready(parts, state.ready)
    _pack_ready(parts, state.ready_high)
    for cs in state.consumers.values():
        _pack_msgs(parts, list(cs.checked.values()))
        if timeouts:
            parts.append(_U32.pack(len(cs.since)))  # stamped: the oldest checked-out messages (timeouts.py)
            parts.append(_col("q", cs.since.values()))
    dlx = list(state.dlx.values())
    _pack_msgs(parts, [m for m, _ in dlx], [r for _, r in dlx])
    live = state.live.key()
    parts.append(_U32.pack(len(live)))
    parts.append(_col("Q", (i for i, _ in live)))
    parts.append(_col("I", (n for _, n in live)))
    body = b"".join(parts)
    fmt = SNAPSHOT_FORMAT if state.tick_clock else 5 if timeouts else 4
    return _HEAD.pack(MAGIC, fmt, state.machine_version, zlib.crc32(body), len(meta)) + body


# ---------------------------------------------------------------- restore


def _thaw(value: Any) -> Any:
    # The codec hands back AMQP-typed subclasses (Long, Symbol) and lists; the
    # state holds plain ints, strs and tuples, as decoded commands do.
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, list):
        return tuple(_thaw(v) for v in value)
    if isinstance(value, dict):
        return {_thaw(k): _thaw(v) for k, v in value.items()}
    if isinstance(value, int) and type(value) is not int:
        return int(value)
    if isinstance(value, str) and type(value) is not str:
        return str(value)
    return value


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: memoryview, pos: int) -> None:
        self.data = data
        self.pos = pos

    def take(self, n: int) -> memoryview:
        end = self.pos + n
        if end > len(self.data):
            raise SnapshotFormatError("truncated snapshot")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def col(self, typecode: str, n: int) -> array:
        a = array(typecode)
        a.frombytes(self.take(n * a.itemsize))
        if _SWAP:
            a.byteswap()
        return a

    def u32(self) -> int:
        return _U32.unpack(self.take(4))[0]

    def ready(self) -> ReadyList:
        n_runs, n = _READY.unpack(self.take(_READY.size))
        firsts = self.col("Q", n_runs)
        counts = self.col("I", n_runs)
        expiries = self.col("q", n_runs)
        sizes = self.col("I", n)
        if sum(counts) != n or 0 in counts:
            raise SnapshotFormatError("ready runs do not add up to the ready messages")
        for r in range(1, n_runs):
            if firsts[r] < firsts[r - 1] + counts[r - 1]:
                raise SnapshotFormatError("ready runs out of order")
        return ReadyList.from_columns(firsts, counts, expiries, sizes)

    def msgs(self, with_reasons: bool = False) -> tuple[list[tuple], list[str] | None, int, Any]:
        """(message tuples, reasons, total size, ids)."""
        n, flags = _SECTION.unpack(self.take(_SECTION.size))
        if not n:
            return [], [] if with_reasons else None, 0, ()
        ids = self.col("Q", n)
        sizes = self.col("I", n)
        exps: Any = repeat(None)
        dcs: Any = repeat(0)
        acqs: Any = repeat(0)
        anns: Any = repeat(None)
        if flags & 1:
            exps = [None if e == -1 else e for e in self.col("q", n)]
        if flags & 2:
            dcs = self.col("I", n)
        if flags & 4:
            acqs = self.col("I", n)
        if flags & 8:
            size = self.u32()
            try:
                pairs = codec.loads(bytes(self.take(size)))
            except Exception as e:  # codec.DecodeError and friends
                raise SnapshotFormatError(f"bad annotations: {e}") from None
            anns = [None] * n
            for i, a in pairs:
                anns[int(i)] = _thaw(a)
        reasons = None
        if flags & 16:
            try:
                reasons = [REASONS[code] for code in self.col("B", n)]
            except IndexError:
                raise SnapshotFormatError("unknown dead-letter reason code") from None
        elif with_reasons:
            raise SnapshotFormatError("dlx section without reasons")
        return list(zip(ids, sizes, exps, dcs, acqs, anns, strict=False)), reasons, sum(sizes), ids  # repeat() columns


def restore(data: bytes) -> QuorumState:
    """The state `snapshot_bytes` wrote. Raises SnapshotFormatError."""
    # A million fresh tuples would wake the cyclic GC over and over; none of
    # them can be part of a cycle.
    paused = gc.isenabled()
    gc.disable()
    try:
        return _restore(data)
    finally:
        if paused:
            gc.enable()


def _restore(data: bytes) -> QuorumState:
    if data[:1] != MAGIC[:1]:
        return _restore_legacy(data)
    if len(data) < _HEAD_V1.size:
        raise SnapshotFormatError("not a quorum queue snapshot: too short")
    magic, fmt = data[:4], _U16.unpack_from(data, 4)[0]
    if magic != MAGIC:
        raise SnapshotFormatError("not a quorum queue snapshot: bad magic")
    if fmt == 1:
        _, _, crc, meta_len = _HEAD_V1.unpack_from(data)
        version, start = 1, _HEAD_V1.size
    elif fmt in (2, 3, 4, 5, SNAPSHOT_FORMAT):
        if len(data) < _HEAD.size:
            raise SnapshotFormatError("not a quorum queue snapshot: too short")
        _, _, version, crc, meta_len = _HEAD.unpack_from(data)
        start = _HEAD.size
    else:
        raise SnapshotFormatError(f"quorum queue snapshot format {fmt} is not known to this build "
                                  f"(it reads 1 to {SNAPSHOT_FORMAT})")  # fmt: skip
    if version > MACHINE_VERSION:
        raise SnapshotFormatError(f"quorum queue machine version {version} is newer than this build's "
                                  f"{MACHINE_VERSION}: this node must be upgraded to read it")  # fmt: skip
    if version < 1:
        raise SnapshotFormatError(f"quorum queue machine version {version} does not exist")
    view = memoryview(data)
    if zlib.crc32(view[start:]) != crc:
        raise SnapshotFormatError("quorum queue snapshot checksum mismatch")
    rd = _Reader(view, start)
    try:
        meta = _thaw(codec.loads(bytes(rd.take(meta_len))))
        publishers: Any = ()
        prio_turn = 0
        tick_clock: list = []
        if fmt == 1:
            config_values, last_index, clock, counters, consumers, service, sac_active = meta
        elif fmt < 4:
            config_values, last_index, clock, counters, consumers, service, sac_active, publishers = meta
        else:  # format 6: tick_clock after prio_turn
            (config_values, last_index, clock, counters, consumers, service, sac_active, publishers, prio_turn,
             *tick_clock) = meta
        state = QuorumState(QuorumConfig(*config_values))
        state.machine_version = version
        state.publishers = _publishers(publishers)
        state.last_index = last_index
        state.clock = clock
        state.tick_clock = bool(tick_clock and tick_clock[0])
        state.counters = Counters(*counters)
        state.sac_active = sac_active
        state.prio_turn = int(prio_turn)
        for cid, priority, node, dc, credit, settled, in_service, *timed_out in consumers:  # format 5: timed_out
            state.consumers[cid] = ConsumerState(cid, priority, node, dc, credit, settled, None, in_service, None,
                                                 bool(timed_out and timed_out[0]))  # fmt: skip
        for prio, cids in service:
            state.service[prio] = deque(state.consumers[cid] for cid in cids)
            state.prios.append(prio)
    except SnapshotFormatError:
        raise
    except Exception as e:  # wrong shapes in the meta value
        raise SnapshotFormatError(f"bad snapshot metadata: {e}") from None
    returned, _, returned_bytes, _ = rd.msgs()
    state.returned = returned  # sorted: a valid heap
    if fmt >= 3:
        state.ready = rd.ready()
        ready_bytes = sum(state.ready.sizes())
        if fmt >= 4:
            state.ready_high = rd.ready()
            ready_bytes += sum(state.ready_high.sizes())
    else:  # formats 1 and 2: a message section of tuples
        ready, _, ready_bytes, _ = rd.msgs()
        state.ready = _ready_from_tuples(ready)
    state.ready_bytes = returned_bytes + ready_bytes
    for cs in state.consumers.values():
        msgs, _, size, ids = rd.msgs()
        cs.checked = dict(zip(ids, msgs, strict=True))
        state.checked_count += len(msgs)
        state.checked_bytes += size
        if fmt >= 5:
            n = rd.u32()
            if n > len(msgs):
                raise SnapshotFormatError("more stamps than checked-out messages")
            cs.since = dict(zip(ids[:n], rd.col("q", n), strict=True))
        if len(cs.since) < len(cs.checked):
            state.unstamped = True
    msgs, reasons, size, ids = rd.msgs(with_reasons=True)
    state.dlx = dict(zip(ids, zip(msgs, reasons or (), strict=True), strict=True))
    state.dlx_bytes = size
    n = rd.u32()
    indexes = rd.col("Q", n)
    counts = rd.col("I", n)
    try:
        state.live = LiveIndexes.from_pairs(indexes, counts)
    except ValueError as e:
        raise SnapshotFormatError(f"bad live index section: {e}") from None
    if rd.pos != len(view):
        raise SnapshotFormatError(f"{len(view) - rd.pos} trailing bytes after the snapshot")
    return state


def _ready_from_tuples(msgs: list[tuple]) -> ReadyList:
    ready = ReadyList()
    last = -1
    for m in msgs:
        if m[3] or m[4] or m[5] is not None or m[0] <= last:
            raise SnapshotFormatError("a ready message that was handed out, or out of order")
        last = m[0]
        ready.append(m[0], m[1], m[2])
    return ready


def _publishers(value: Any) -> dict[str, PublisherState]:
    """The dedup tables from [[publisher, low, [above], [[seq, [[outcome, [corr]]]]]]] (thawed)."""
    return {
        publisher: PublisherState(low, set(above), {seq: tuple((o, tuple(corrs)) for o, corrs in confirms)
                                                   for seq, confirms in outcomes})
        for publisher, low, above, outcomes in value
    }  # fmt: skip


def _restore_legacy(data: bytes) -> QuorumState:
    """Format 0: the host's wrapper around a format 1 snapshot, written before
    the machine held the publish dedup tables."""
    try:
        value = codec.loads(data)
    except Exception as e:  # codec.DecodeError and friends
        raise SnapshotFormatError(f"not a quorum queue snapshot: {e}") from None
    if not isinstance(value, list) or len(value) != 3 or value[0] != _LEGACY_HOST_FORMAT:
        raise SnapshotFormatError("not a quorum queue snapshot")
    _, publishers, inner = value
    if not isinstance(inner, bytes) or inner[:6] != MAGIC + _U16.pack(1):
        raise SnapshotFormatError("a format 0 quorum queue snapshot must hold one of format 1")
    state = _restore(inner)
    try:
        state.publishers = _publishers(_thaw(publishers))
    except Exception as e:  # wrong shapes
        raise SnapshotFormatError(f"bad publisher tables: {e}") from None
    return state
