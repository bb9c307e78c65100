"""A vhost's default queue type (feature flag vhost_default_queue_type):
metadata.add_vhost version 2 sets it, version 1 leaves it, and a snapshot
that holds none is written as before it existed."""

from __future__ import annotations

from metadata_helpers import cluster, k, refused, run

from amqp import codec
from metadata import commands as c
from metadata import effects as fx
from metadata.feature_flags import VHOST_DEFAULT_QUEUE_TYPE
from metadata.machine import apply
from metadata.snapshot import decode_state, encode_state
from raft import records


def enabled():
    return run(cluster("/"), c.EnableFeatureFlag(k(), VHOST_DEFAULT_QUEUE_TYPE))


def test_refused_until_the_flag_is_enabled():
    error = refused(cluster("/"), c.AddVHostWithQueueType(k(), "v", "", (), "quorum"), fx.PRECONDITION_FAILED)
    assert VHOST_DEFAULT_QUEUE_TYPE in error.description


def test_set_kept_by_version_1_and_reported_in_effects():
    state, result, effects = apply(enabled(), c.AddVHostWithQueueType(k(), "v", "d", ("t",), "quorum"))
    assert result == fx.CREATED and effects == (fx.VHostAdded("v", "d", ("t",), "quorum"),)
    state, _, effects = apply(state, c.AddVHost(k(), "v", "new"))  # an old proposer: the type stays
    assert effects == (fx.VHostUpdated("v", "new", (), "quorum"),)
    assert state.vhost("v").record.default_queue_type == "quorum"
    state = run(state, c.AddVHostWithQueueType(k(), "v", "new", (), ""))
    assert state.vhost("v").record.default_queue_type == ""


def test_an_unknown_type_is_refused_naming_it():
    error = refused(enabled(), c.AddVHostWithQueueType(k(), "v", "", (), "lazy"), fx.INVALID_FIELD)
    assert "'lazy'" in error.description


def test_version_2_is_its_own_record_kind():
    command = c.AddVHostWithQueueType("key", "v", "", (), "stream")
    assert records.decode(records.encode(command)) == command
    assert codec.loads(records.encode(command))[:2] == ["metadata.add_vhost", 2]


def test_snapshot_writes_format_1_without_a_type_and_format_2_with_one():
    state = enabled()
    assert codec.loads(encode_state(state))[4][0][0] == [1, "/", "", []]  # as before: older builds read it
    state = run(state, c.AddVHostWithQueueType(k(), "/", "", (), "quorum"))
    data = encode_state(state)
    assert codec.loads(data)[4][0][0] == [2, "/", "", [], "quorum"]
    assert decode_state(data) == state and encode_state(decode_state(data)) == data
