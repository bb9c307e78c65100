"""Versioned command records: explicit encoding, registry, decoding errors."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from amqp import codec
from raft import records
from raft.records import RecordError, UnknownRecordError, command, decode, encode, kind_of


@command("test.declare_queue", version=1)
@dataclass(frozen=True)
class DeclareQueueV1:
    vhost: str
    name: str
    durable: bool = True


@command("test.declare_queue", version=2)
@dataclass(frozen=True)
class DeclareQueueV2:
    vhost: str
    name: str
    durable: bool
    arguments: dict
    tags: tuple = ()


@command("test.blob", version=1)
@dataclass(frozen=True)
class Blob:
    data: bytes
    n: int
    ratio: float
    nothing: None = None


def test_roundtrip_and_layout():
    r = DeclareQueueV1("/", "orders")
    data = encode(r)
    assert codec.loads(data) == ["test.declare_queue", 1, "/", "orders", True]
    assert decode(data) == r
    assert kind_of(r) == ("test.declare_queue", 1)


def test_old_and_new_versions_both_decode():
    v1 = DeclareQueueV1("/", "a", False)
    v2 = DeclareQueueV2("/", "a", True, {"x-queue-type": "quorum", "x-max-length": 10}, ("t1", "t2"))
    assert decode(encode(v1)) == v1
    back = decode(encode(v2))
    assert back == v2 and type(back) is DeclareQueueV2
    assert isinstance(back.tags, tuple)


def test_values_come_back_as_plain_python_types():
    b = decode(encode(Blob(b"\x00\xff", 2**64 - 1, 0.5)))
    assert b == Blob(b"\x00\xff", 2**64 - 1, 0.5)
    assert type(b.n) is int


def test_unknown_kind_or_version_is_refused_not_guessed():
    with pytest.raises(UnknownRecordError):
        decode(codec.dumps(["test.declare_queue", 99, "/", "a", True]))
    with pytest.raises(UnknownRecordError):
        decode(codec.dumps(["test.nope", 1]))


@pytest.mark.parametrize(
    "data",
    [b"", b"\xff", codec.dumps("x"), codec.dumps([1, 2]), codec.dumps(["test.declare_queue", 1, "/"])],
)
def test_malformed_bytes_raise_record_error(data):
    with pytest.raises(RecordError):
        decode(data)


def test_pickle_is_not_a_record():
    import pickle

    with pytest.raises(RecordError):
        decode(pickle.dumps(DeclareQueueV1("/", "a")))


def test_registry_rules():
    with pytest.raises(TypeError):

        @command("test.mutable")
        @dataclass
        class Mutable:
            x: int

    with pytest.raises(ValueError):

        @command("test.declare_queue", version=1)
        @dataclass(frozen=True)
        class Clash:
            x: int

    with pytest.raises(ValueError):
        command("test.v0", version=0)
    assert records.registered()[("test.declare_queue", 2)] is DeclareQueueV2


def test_unencodable_values_are_refused():
    @command("test.any", version=1)
    @dataclass(frozen=True)
    class Any_:
        x: object

    with pytest.raises(RecordError):
        encode(Any_(object()))
    with pytest.raises(RecordError):
        encode(Any_(2**64))
    with pytest.raises(RecordError):
        encode(DeclareQueueV1)  # a class is not a record


class _PairCodec:
    """A binary layout for `Pair`: the bytes as they are, then n as 8 bytes."""

    def encode(self, record):
        return [record.data, record.n.to_bytes(8, "big")]

    def decode(self, data, pos):
        return Pair(bytes(data[pos:-8]), int.from_bytes(data[-8:], "big"))


@command("test.pair", version=1, binary=_PairCodec())
@dataclass(frozen=True)
class Pair:
    data: bytes
    n: int


def test_a_binary_record_carries_its_bytes_as_they_are_and_decodes_past_a_prefix():
    r = Pair(b"\x00Sw\xa0\x03abc", 7)
    data = encode(r, prefix=b"\x00")
    assert data == b"\x00\xff\x09test.pair\x00\x01" + r.data + (7).to_bytes(8, "big")
    assert decode(data, 1) == r and records.applies_as_proposed(r)
    assert not records.applies_as_proposed(Blob(b"", 0, 0.0))
    with pytest.raises(UnknownRecordError):
        decode(b"\xff\x09test.pair\x00\x02")
    with pytest.raises(RecordError):
        decode(b"\xff\x20test")


def test_the_leader_applies_the_binary_record_it_proposed_and_followers_decode_theirs(tmp_path):
    from raft_harness import Cluster

    class Recording:
        def __init__(self):
            self.applied = []

        def apply(self, record, index):
            self.applied.append(record)
            return len(self.applied)

        def snapshot(self):
            return b""

        def restore(self, data):
            pass

    c = Cluster.start("ours", tmp_path)
    try:
        leader = c.wait_leader()
        for m in c.members:
            m.obj.machine = Recording()
        proposed = [Pair(b"m%d" % i, i) for i in range(3)]
        done = []
        for r in proposed:
            leader.obj.propose(r, callback=lambda res, outcome: done.append(outcome))
        c.run_until(lambda: all(len(m.obj.machine.applied) == 3 for m in c.members))
        for m in c.members:
            applied = m.obj.machine.applied
            assert applied == proposed
            same_objects = all(a is p for a, p in zip(applied, proposed, strict=True))
            assert same_objects == (m is leader)
        assert not leader.obj._w_proposed  # nothing held once applied
    finally:
        c.destroy()
