"""The stream log on real files: chunks across segments, the index, reopening
(a torn tail cut, a lost index rebuilt) and retention by size and age."""

from __future__ import annotations

import os

from queues.stream.chunk import encode_record
from queues.stream.config import StreamConfig
from queues.stream.log import StreamLog
from queues.stream.spec import ReadSpec


def append(log: StreamLog, bodies: list[bytes], timestamp: int = 1000, values=None) -> None:
    values = values or [None] * len(bodies)
    records = [encode_record("", "k", v, b) for b, v in zip(bodies, values, strict=True)]
    plan = log.plan(records, list(values), timestamp)
    StreamLog.write([plan])
    StreamLog.commit([plan])


def read_all(log: StreamLog, offset: int = 0) -> list[tuple[int, bytes]]:
    out = []
    while (ref := log.chunk_for(offset)) is not None:
        header, _ = ref.header()
        out += [(r.offset, r.payload) for r in ref.records(header) if r.offset >= offset]
        offset = ref.next_offset
    return out


def test_offsets_are_dense_across_chunks_and_segments(tmp_path):
    log = StreamLog(str(tmp_path / "s"), StreamConfig(segment_bytes=300))
    for i in range(10):
        append(log, [f"m{i}-{j}".encode() for j in range(3)], timestamp=1000 + i)
    assert len(log.segments) > 2  # rolled: about two chunks a segment
    assert (log.first_offset, log.next_offset, log.last_chunk_offset()) == (0, 30, 27)
    assert read_all(log) == [(3 * i + j, f"m{i}-{j}".encode()) for i in range(10) for j in range(3)]
    assert read_all(log, 13)[0] == (13, b"m4-1")  # from the middle of a chunk
    assert log.offset_for_timestamp(1004) == 12 and log.offset_for_timestamp(5000) == 30
    log.close()


def test_reopening_finds_every_chunk_and_cuts_a_torn_tail(tmp_path):
    path = str(tmp_path / "s")
    log = StreamLog(path, StreamConfig(segment_bytes=10_000))
    for i in range(5):
        append(log, [b"x" * 50, b"y" * 50], timestamp=i)
    last = log.segments[-1]
    log.close()
    with open(last.path, "ab") as f:  # a chunk half written when the node died
        f.write(b"WSC1" + b"\0" * 20)
    os.truncate(last.index_path, 3 * 32)  # the index lost its last two entries (it is not fsynced)
    log = StreamLog(path, StreamConfig(segment_bytes=10_000))
    assert log.next_offset == 10 and len(read_all(log)) == 10
    assert os.path.getsize(last.path) == log.segments[-1].size  # the torn tail is gone
    append(log, [b"after"])
    assert read_all(log, 10) == [(10, b"after")]
    log.close()


def test_a_corrupt_last_chunk_is_dropped(tmp_path):
    path = str(tmp_path / "s")
    log = StreamLog(path, StreamConfig())
    append(log, [b"kept"])
    append(log, [b"bitrot"])
    seg = log.segments[-1]
    log.close()
    with open(seg.path, "r+b") as f:
        f.seek(-2, os.SEEK_END)
        f.write(b"!!")
    log = StreamLog(path, StreamConfig())
    assert read_all(log) == [(0, b"kept")]
    log.close()


def test_retention_deletes_whole_segments_from_the_head(tmp_path):
    log = StreamLog(str(tmp_path / "s"), StreamConfig(segment_bytes=200))
    for i in range(10):
        append(log, [b"z" * 100], timestamp=1000 * i)
    segments = len(log.segments)
    assert log.apply_retention(10_000, StreamConfig(max_bytes=450)) > 0
    assert len(log.segments) < segments and log.bytes <= 450 + log.segments[0].size
    first = log.first_offset
    assert first > 0 and read_all(log)[0][0] == first and log.next_offset == 10
    # by age: segments whose newest message is older than 5 s at t=10 s
    log.apply_retention(10_000, StreamConfig(max_age_s=5))
    assert all(s.last_timestamp >= 5000 for s in log.segments)
    assert log.apply_retention(10**9, StreamConfig(max_age_s=1)) >= 0 and len(log.segments) == 1  # the newest stays
    log.close()


def test_bloom_filter_lets_a_reader_skip_chunks(tmp_path):
    log = StreamLog(str(tmp_path / "s"), StreamConfig())
    append(log, [b"a1", b"a2"], values=["apple", "apple"])
    append(log, [b"b1", b"u1"], values=["banana", None])
    spec = ReadSpec.from_filter_set({"rabbitmq:stream-filter": "apple"})
    headers = [log.chunk_for(o).header() for o in (0, 2)]
    assert [spec.chunk_may_match(h, bloom) for h, bloom in headers] == [True, False]
    unfiltered = ReadSpec.from_filter_set({"rabbitmq:stream-filter": ["apple"],
                                           "rabbitmq:stream-match-unfiltered": True})  # fmt: skip
    assert unfiltered.chunk_may_match(*headers[1]) and unfiltered.matches(None, b"") and not unfiltered.matches("banana", b"")
    log.close()


def test_an_empty_segment_after_a_torn_tail_does_not_leave_a_gap(tmp_path):
    path = str(tmp_path / "s")
    log = StreamLog(path, StreamConfig(segment_bytes=10_000))
    append(log, [b"a", b"b"])
    append(log, [b"c", b"d"])
    seg = log.segments[-1]
    log.close()
    with open(seg.path, "r+b") as f:  # the last chunk torn ...
        f.truncate(os.path.getsize(seg.path) - 1)
    open(os.path.join(path, f"{4:020d}.segment"), "wb").close()  # ... and the roll after it empty
    log = StreamLog(path, StreamConfig(segment_bytes=10_000))
    assert (log.next_offset, len(log.segments)) == (2, 1)
    append(log, [b"again"])
    assert read_all(log) == [(0, b"a"), (1, b"b"), (2, b"again")]
    log.close()


def test_only_a_few_sealed_segments_keep_their_index_in_memory(tmp_path):
    path = str(tmp_path / "s")
    log = StreamLog(path, StreamConfig(segment_bytes=60))
    for i in range(12):
        append(log, [f"m{i}".encode()], timestamp=i)
    assert len(log.segments) >= 8
    assert read_all(log) == [(i, f"m{i}".encode()) for i in range(12)]  # reading all of them in turn
    sealed = log.segments[:-1]
    assert sum(s.loaded for s in sealed) <= 4 and log.segments[-1].loaded
    assert log.offset_for_timestamp(1) == 1 and log.offset_for_timestamp(11) == 11
    log.close()
    log = StreamLog(path, StreamConfig(segment_bytes=60))  # reopened: the sealed ones start unloaded
    assert not any(s.loaded for s in log.segments[:-1])
    assert read_all(log, 5) == [(i, f"m{i}".encode()) for i in range(5, 12)] and log.first_offset == 0
    log.close()


def test_a_failed_write_is_forgotten_and_the_next_goes_where_the_committed_end(tmp_path):
    path = str(tmp_path / "s")
    log = StreamLog(path, StreamConfig(segment_bytes=200))
    append(log, [b"one"])
    for _ in range(2):  # planned (each rolls to a new segment), never written
        log.plan([encode_record("", "", None, b"x" * 150)], [None], 1)
    assert len(log.segments) == 3
    log.abandon()  # what the queue does when StreamLog.write raised (disk full, say)
    assert len(log.segments) == 1 and log.allocated_offset == 1
    append(log, [b"two"])
    assert read_all(log) == [(0, b"one"), (1, b"two")]
    log.close()
    log = StreamLog(path, StreamConfig(segment_bytes=200))
    assert read_all(log) == [(0, b"one"), (1, b"two")]
    log.close()


def test_x_stream_filter_size_bytes_is_the_size_of_each_chunks_bloom_filter(tmp_path):
    for size in (16, 255):
        log = StreamLog(str(tmp_path / f"s{size}"), StreamConfig.from_arguments({"x-stream-filter-size-bytes": size}))
        append(log, [b"a"], values=["apple"])
        header, bloom = log.chunk_for(0).header()
        assert header.bloom_len == len(bloom) == size
        log.close()
