"""storage.batch.BatchWriter on real rocksdict files: tickets, seal/write, fsync, format marker, failure."""

from __future__ import annotations

import os
import threading

import pytest
from rocksdict import Options, Rdict

from storage.batch import BatchWriter, SealedBatch


class WriterError(Exception):
    pass


class WriterClosed(WriterError):
    pass


class WriterFormat(WriterError):
    pass


def open_writer(path, **kw) -> BatchWriter:
    kw.setdefault("label", "test store")
    kw.setdefault("format_key", b"\x00format")
    kw.setdefault("format_version", 1)
    kw.setdefault("error", WriterError)
    kw.setdefault("closed_error", WriterClosed)
    kw.setdefault("format_error", WriterFormat)
    return BatchWriter(path, **kw)


@pytest.fixture
def writer(tmp_path):
    w = open_writer(tmp_path / "db")
    yield w
    w.close()


def commit(w: BatchWriter) -> None:
    batch = w.seal()
    if batch is not None:
        w.write(batch)


def test_tickets_count_buffered_writes_and_durable_follows_the_written_batch(writer):
    assert (writer.pending_seq(), writer.durable_seq()) == (0, 0)
    assert writer.put(b"a", b"1") == 1
    assert writer.put(b"b", b"2") == 2
    assert writer.delete(b"a") == 3
    assert writer.has_pending() and writer.durable_seq() == 0
    assert writer.db.get(b"b") is None  # pending writes are not visible
    commit(writer)
    assert writer.durable_seq() == 3 and not writer.has_pending() and not writer.has_unwritten()
    assert writer.db.get(b"a") is None and writer.db.get(b"b") == b"2"
    assert writer.writes == 1


def test_seal_takes_the_pending_writes_and_later_writes_go_to_the_next_batch(writer):
    writer.put(b"a", b"1")
    writer.put(b"b", b"2")
    first = writer.seal()
    assert isinstance(first, SealedBatch) and (first.base, first.ticket, first.writes) == (0, 2, 2)
    assert writer.has_unwritten() and writer.sealed_seq() == 2
    writer.put(b"c", b"3")
    assert writer.seal() is not None and writer.seal() is None  # nothing pending after the second
    writer.write(first)
    assert writer.durable_seq() == 2 and writer.db.get(b"c") is None


def test_batches_must_be_written_in_seal_order(writer):
    writer.put(b"a", b"1")
    first = writer.seal()
    writer.put(b"b", b"2")
    second = writer.seal()
    with pytest.raises(WriterError, match="out of order"):
        writer.write(second)
    writer.write(first)
    writer.write(second)
    assert writer.durable_seq() == 2


def test_delete_range_is_one_write_over_a_half_open_range(writer):
    for k in (b"k1", b"k2", b"k3"):
        writer.put(k, b"v")
    assert writer.delete_range(b"k1", b"k3") == 4
    commit(writer)
    assert list(writer.db.keys(from_key=b"k")) == [b"k3"]


def test_on_pending_hears_the_first_write_into_an_empty_batch_only(writer):
    heard: list[int] = []
    writer.on_pending = lambda: heard.append(writer.pending_seq())
    writer.put(b"a", b"1")
    writer.put(b"b", b"1")
    assert heard == [1]
    batch = writer.seal()
    writer.put(b"c", b"1")  # the pending batch is empty again, though `batch` is not written yet
    assert heard == [1, 3]
    writer.write(batch)


def test_written_batches_survive_reopening_and_pending_ones_do_not(tmp_path):
    w = open_writer(tmp_path / "db")
    w.put(b"kept", b"1")
    commit(w)
    w.put(b"lost", b"2")
    w.close()  # closes without writing the pending batch
    w = open_writer(tmp_path / "db")
    try:
        assert w.db.get(b"kept") == b"1" and w.db.get(b"lost") is None
        assert w.pending_seq() == 0  # tickets are per process
    finally:
        w.close()


def test_write_fdatasyncs_the_wal_and_sync_false_does_not(tmp_path, monkeypatch):
    calls: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (calls.append(fd), real(fd))[1])
    synced = open_writer(tmp_path / "synced")
    unsynced = open_writer(tmp_path / "unsynced", sync=False)
    try:
        n = len(calls)
        unsynced.put(b"a", b"1")
        commit(unsynced)
        assert len(calls) == n and unsynced.durable_seq() == 1
        synced.put(b"a", b"1")
        commit(synced)
        assert len(calls) > n
    finally:
        synced.close()
        unsynced.close()


def test_write_may_run_on_another_thread(writer):
    writer.put(b"a", b"1")
    batch = writer.seal()
    writer.put(b"b", b"2")  # buffering continues while the batch is written
    t = threading.Thread(target=writer.write, args=(batch,))
    t.start()
    t.join()
    assert writer.durable_seq() == 1 and writer.has_pending()


def test_a_failed_write_reports_once_raises_and_leaves_durable_seq(tmp_path):
    failures: list[Exception] = []
    w = open_writer(tmp_path / "db", on_failure=failures.append)

    class BrokenWal:
        def sync(self):
            raise OSError(5, "EIO")

        def close(self):
            pass

    w._wal = BrokenWal()
    w.put(b"a", b"1")
    with pytest.raises(WriterError, match="test store write failed") as raised:
        commit(w)
    assert failures == [raised.value] and isinstance(raised.value.__cause__, OSError)
    assert w.durable_seq() == 0 and w.has_unwritten() and w.writes == 0
    w.close()


def test_a_new_database_gets_the_format_marker_and_a_wrong_one_is_refused(tmp_path):
    w = open_writer(tmp_path / "db", format_version=1)
    w.close()
    with pytest.raises(WriterFormat, match="test store format"):
        open_writer(tmp_path / "db", format_version=2)
    # Another kind of database: data but no marker.
    other = Rdict(str(tmp_path / "other"), Options(raw_mode=True))
    other.put(b"x", b"y")
    other.close()
    with pytest.raises(WriterFormat, match="no test store format marker"):
        open_writer(tmp_path / "other")


def test_use_after_close_raises_the_closed_error(tmp_path):
    w = open_writer(tmp_path / "db")
    w.close()
    w.close()  # idempotent
    assert w.closed
    with pytest.raises(WriterClosed, match="test store is closed"):
        w.seal()
    with pytest.raises(WriterClosed):
        _ = w.db


def test_an_unopenable_path_raises_the_owners_error(tmp_path):
    (tmp_path / "file").write_bytes(b"not a directory")
    with pytest.raises(WriterError, match="cannot open test store"):
        open_writer(tmp_path / "file")
