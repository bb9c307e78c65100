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
