"""MessageStore on real RocksDB files: buffering, commit, tickets, recovery."""

from __future__ import annotations

import pytest

from storage.message_store import (
    FORMAT_VERSION,
    MessageStore,
    Record,
    StoreClosedError,
    StoreError,
    StoreFormatError,
    queue_chunks,
)


def rec(body: bytes, **kw: int) -> Record:
    return Record(body=body, enqueued_at=1_700_000_000_000, **kw)


@pytest.fixture
def path(tmp_path):
    return tmp_path / "messages"


@pytest.fixture
def store(path):
    s = MessageStore(path)
    yield s
    s.close()


def test_record_roundtrip_and_layout():
    r = Record(body=b"hello", enqueued_at=123, expires_at=456, delivery_count=7, flags=0x81)
    data = r.encode()
    assert data[0] == FORMAT_VERSION
    assert data[1] == 0x81
    assert int.from_bytes(data[2:10], "big") == 123
    assert int.from_bytes(data[10:18], "big") == 456
    assert int.from_bytes(data[18:22], "big") == 7
    assert data[22:] == b"hello"
    assert Record.decode(data) == r
    # expires_at None is stored as 0 and comes back as None
    assert Record.decode(Record(b"", 1).encode()) == Record(b"", 1, None, 0, 0)


def test_record_rejects_unknown_version_and_bad_fields():
    data = bytearray(Record(b"x").encode())
    data[0] = 99
    with pytest.raises(StoreFormatError):
        Record.decode(bytes(data))
    with pytest.raises(StoreFormatError):
        Record.decode(bytes([FORMAT_VERSION, 0, 1]))
    with pytest.raises(ValueError):
        Record(b"x", delivery_count=-1).encode()
    with pytest.raises(ValueError):
        Record(b"x", flags=256).encode()


def test_writes_are_invisible_until_commit(store):
    t = store.put("q", 1, rec(b"a"))
    assert t == 1 and store.pending_seq() == 1 and store.durable_seq() == 0
    assert store.has_pending()
    assert store.get("q", 1) is None
    assert store.commit() == 1
    assert store.durable_seq() == 1 and not store.has_pending()
    assert store.get("q", 1) == rec(b"a")
    assert store.commits == 1
    # an empty commit writes nothing
    assert store.commit() == 1
    assert store.commits == 1


def test_put_delete_update(store):
    for seq in range(5):
        store.put("q", seq, rec(b"m%d" % seq))
    store.commit()
    store.delete("q", 2)
    store.update("q", 3, rec(b"m3", delivery_count=1))
    store.delete("q", 99)  # absent: a no-op
    assert store.pending_seq() == 8
    store.commit()
    assert store.get("q", 2) is None
    assert store.get("q", 3).delivery_count == 1
    assert [s for s, _ in store.iter_queue("q")] == [0, 1, 3, 4]


def test_ops_in_one_batch_apply_in_order(store):
    store.put("q", 1, rec(b"first"))
    store.delete("q", 1)
    store.put("q", 1, rec(b"again"))
    store.put("q", 2, rec(b"gone"))
    store.delete("q", 2)
    store.commit()
    assert store.get("q", 1).body == b"again"
    assert store.get("q", 2) is None


def test_iteration_is_in_seq_order_not_insertion_order(store):
    seqs = [5, 300, 1, 2**40, 256, 0, 2**64 - 1, 65536]
    for seq in seqs:
        store.put("q", seq, rec(seq.to_bytes(8, "big")))
    store.commit()
    got = list(store.iter_queue("q"))
    assert [s for s, _ in got] == sorted(seqs)
    assert all(r.body == s.to_bytes(8, "big") for s, r in got)
    assert [s for s, _ in store.iter_queue("q", from_seq=256)] == [256, 300, 65536, 2**40, 2**64 - 1]


def test_queues_whose_names_extend_each_other_stay_apart(store):
    names = ["a", "ab", "a\x00", "b", "", "ä", "a" * 300]
    for i, name in enumerate(names):
        for seq in range(3):
            store.put(name, seq, rec(b"%d:%d" % (i, seq)))
    store.commit()
    for i, name in enumerate(names):
        assert [r.body for _, r in store.iter_queue(name)] == [b"%d:%d" % (i, s) for s in range(3)]
    store.delete_queue("a")
    store.commit()
    recovered = store.recover()
    assert "a" not in recovered
    assert set(recovered) == set(names) - {"a"}
    assert all(len(v) == 3 for v in recovered.values())


def test_delete_queue_removes_only_earlier_writes(store):
    for seq in range(1000):
        store.put("q", seq, rec(b"old"))
    store.put("other", 1, rec(b"keep"))
    store.commit()
    store.put("q", 1000, rec(b"old, pending"))
    store.delete_queue("q")
    store.put("q", 7, rec(b"new"))  # redeclared under the same name
    store.commit()
    assert list(store.iter_queue("q")) == [(7, rec(b"new"))]
    assert store.get("other", 1).body == b"keep"


def test_recover_after_reopen_multiple_queues(path):
    with MessageStore(path) as s:
        for q in ("orders", "events", "z"):
            for seq in range(10, 0, -1):
                s.put(q, seq, rec(q.encode() + b"%d" % seq, expires_at=seq))
        s.delete("events", 5)
        s.update("z", 1, rec(b"z1", expires_at=1, delivery_count=3))
        s.delete_queue("orders")
        s.put("orders", 42, rec(b"o42"))
        s.commit()
        s.put("late", 1, rec(b"committed by close"))
    with MessageStore(path) as s:
        got = s.recover()
        assert s.pending_seq() == 0 and s.durable_seq() == 0
    assert set(got) == {"orders", "events", "z", "late"}
    assert got["orders"] == [(42, rec(b"o42"))]
    assert [seq for seq, _ in got["events"]] == [1, 2, 3, 4, 6, 7, 8, 9, 10]
    assert got["events"][0] == (1, rec(b"events1", expires_at=1))
    assert got["z"][0] == (1, rec(b"z1", expires_at=1, delivery_count=3))
    assert [seq for seq, _ in got["z"]] == list(range(1, 11))
    assert got["late"] == [(1, rec(b"committed by close"))]


def test_a_queue_copied_from_a_store_no_process_writes_leaves_its_checkpoint_and_other_queues(path, tmp_path):
    with MessageStore(path) as lost:  # a lost worker's store: closed, as a killed process leaves it
        for seq in range(1, 41):
            lost.put("moving", seq, rec(b"m%d" % seq), size=100 + seq)
        lost.put("moving-not", 1, rec(b"other queue"))
        lost.put_positions("moving", b"an old checkpoint")
        lost.commit()
    chunks = list(queue_chunks(str(path), "moving", chunk_bytes=200))
    assert len(chunks) > 4 and sum(len(c) for c in chunks) == 80  # 40 messages, 40 index entries
    with MessageStore(tmp_path / "adopter") as adopter:
        adopter.put("own", 1, rec(b"own"))
        for chunk in chunks:
            adopter.put_copied(chunk)
        adopter.commit()
        assert [(seq, r.body) for seq, r in adopter.iter_queue("moving")] == [(s, b"m%d" % s) for s in range(1, 41)]
        assert [e[:2] for e in adopter.iter_index("moving")] == [(s, 100 + s) for s in range(1, 41)]
        assert sorted(adopter.indexed_queues()) == ["moving", "own"]
        assert adopter.take_positions() == {}  # a checkpoint another process wrote may be stale
    with MessageStore(path) as lost:  # read, not changed
        assert len(list(lost.iter_queue("moving"))) == 40 and lost.take_positions() == {"moving": b"an old checkpoint"}


def test_a_copy_replaces_a_stale_copy_of_the_queue(path, tmp_path):
    with MessageStore(path) as source, MessageStore(tmp_path / "target") as target:
        for seq in (1, 2):
            source.put("q", seq, rec(b"now%d" % seq))
        source.commit()
        target.put("q", 99, rec(b"taken long ago, left by an earlier move"))
        target.put("other", 1, rec(b"stays"))
        target.commit()
        assert target.copy_queue_from(source, "q") == 2
        assert [(seq, r.body) for seq, r in target.iter_queue("q")] == [(1, b"now1"), (2, b"now2")]
        assert [seq for seq, *_ in target.iter_index("q")] == [1, 2]
        assert len(list(target.iter_queue("other"))) == 1


def test_uncommitted_writes_are_lost_without_close(path):
    s = MessageStore(path)
    s.put("q", 1, rec(b"durable"))
    s.commit()
    s.put("q", 2, rec(b"never committed"))
    # Drop the pending batch the way a crash would, then close the DB itself.
    s.seal()
    s._batches.close()
    with MessageStore(path) as s2:
        assert s2.recover() == {"q": [(1, rec(b"durable"))]}


def test_seal_and_write_split_keeps_new_writes_for_next_batch(store):
    store.put("q", 1, rec(b"a"))
    store.put("q", 2, rec(b"b"))
    batch = store.seal()
    assert (batch.base, batch.ticket, batch.writes) == (0, 2, 2)
    assert store.seal() is None
    store.put("q", 3, rec(b"c"))  # lands in the next batch
    store.write(batch)
    assert store.durable_seq() == 2 and store.has_pending()
    assert [s for s, _ in store.iter_queue("q")] == [1, 2]
    nxt = store.seal()
    assert (nxt.base, nxt.ticket) == (2, 3)
    store.write(nxt)
    assert [s for s, _ in store.iter_queue("q")] == [1, 2, 3]


def test_batches_must_be_written_in_seal_order(store):
    store.put("q", 1, rec(b"a"))
    first = store.seal()
    store.put("q", 2, rec(b"b"))
    second = store.seal()
    with pytest.raises(StoreError, match="out of order"):
        store.write(second)
    store.write(first)
    store.write(second)
    assert store.durable_seq() == 2


def test_on_pending_fires_once_per_empty_batch(store):
    calls = []
    store.on_pending = lambda: calls.append(store.pending_seq())
    store.put("q", 1, rec(b"a"))
    store.put("q", 2, rec(b"b"))
    store.delete("q", 1)
    assert calls == [1]
    batch = store.seal()
    store.delete_queue("q")  # the pending batch is empty again
    assert calls == [1, 4]
    store.write(batch)
    assert calls == [1, 4]


def test_bad_arguments(store):
    with pytest.raises(ValueError):
        store.put("q", -1, rec(b"x"))
    with pytest.raises(ValueError):
        store.put("q", 2**64, rec(b"x"))
    with pytest.raises(ValueError):
        store.put("x" * 70_000, 1, rec(b"x"))
    assert store.pending_seq() == 0 and not store.has_pending()


def test_closed_store_refuses_use(path):
    s = MessageStore(path)
    s.close()
    s.close()  # idempotent
    assert s.closed
    with pytest.raises(StoreClosedError):
        s.get("q", 1)
    with pytest.raises(StoreClosedError):
        s.recover()


def test_refuses_a_foreign_database(path):
    from rocksdict import Options, Rdict

    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    db = Rdict(str(path), opts)
    db.put(b"something", b"else")
    db.close()
    with pytest.raises(StoreFormatError):
        MessageStore(path)


def test_unsynced_mode_still_commits(path):
    with MessageStore(path, sync=False) as s:
        s.put("q", 1, rec(b"a"))
        s.commit()
        assert s.get("q", 1) == rec(b"a")


def test_wal_syncer_follows_the_log_rocksdb_writes(store):
    # Batches are written unsynced and the WAL is fdatasync'ed by the store
    # (rocksdict holds the GIL through a synced write). Guard the assumption
    # that the file it syncs is the one the writes land in, including after
    # memtable switches that start a new WAL.
    import os

    seen = set()
    seq = 0
    for _round in range(3):
        for _ in range(3):
            wal = store._batches._wal
            before = os.fstat(wal._fd).st_size
            store.put("q", seq, rec(b"x" * 100))
            seq += 1
            store.commit()
            assert os.fstat(wal._fd).st_size > before
            seen.add(wal._newest)
        store._batches.db.flush()  # memtable switch: RocksDB starts a new WAL
        store.put("q", seq, rec(b"after switch"))
        seq += 1
        store.commit()
        assert wal._newest not in seen
    assert [s for s, _ in store.iter_queue("q")] == list(range(seq))
