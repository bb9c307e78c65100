"""Replicated streams in the metadata (feature flag stream_replication): the
stream's record (leader, replicas, epoch), metadata.stream_elect fencing by
epoch, and the record in snapshots."""

from __future__ import annotations

from metadata_helpers import ALL_FLAGS, cluster, k, refused, run, step

from metadata import commands as c
from metadata import effects as fx
from metadata.feature_flags import STREAM_REPLICATION
from metadata.snapshot import decode_state, encode_state
from metadata.state import StreamRecord


def streams_on(*vhosts: str, flags=ALL_FLAGS):
    state = cluster(*vhosts, members=("n1", "n2", "n3"), flags=flags)
    for flag in ("warren_metadata_raft_v1", "stream_queue", STREAM_REPLICATION):
        if flag in flags:
            state = run(state, c.EnableFeatureFlag(k(), flag))
    return state


def declare(state, name="s", leader="n1", replicas=("n1", "n2", "n3")):
    return step(state, c.DeclareQueue(k(), "v", name, "stream", leader=leader, replicas=replicas))


def test_a_declared_stream_gets_its_record_at_epoch_one():
    state, result, effects = declare(streams_on("v"))
    assert result.ok
    assert state.stream("v", "s") == StreamRecord("v", "s", "n1", ("n1", "n2", "n3"), 1)
    assert effects[0].replicas == ("n1", "n2", "n3")
    # a stream placed on its leader alone is a group of one
    state, _, _ = declare(state, "one", replicas=())
    assert state.stream("v", "one").replicas == ("n1",) and state.queue("v", "one").replicas == ("n1",)
    refused(state, c.DeclareQueue(k(), "v", "bad", "stream", leader="n1", replicas=("n2", "n3")), fx.INVALID_FIELD)


def test_without_the_flag_a_stream_has_no_record():
    flags = tuple(f for f in ALL_FLAGS if f != STREAM_REPLICATION)
    state, result, _ = declare(streams_on("v", flags=flags), replicas=())
    assert result.ok and state.stream("v", "s") is None and state.queue("v", "s").leader == "n1"


def test_stream_elect_is_fenced_by_the_epoch():
    state, _, _ = declare(streams_on("v"))
    state, result, effects = step(state, c.StreamElect(k(), "v", "s", 1, "n2"))
    assert result.ok
    assert state.stream("v", "s") == StreamRecord("v", "s", "n2", ("n1", "n2", "n3"), 2)
    assert state.queue("v", "s").leader == "n2"  # what proxies and the HTTP API read
    assert effects == (fx.QueueReplicasChanged("v", "s", "stream", "n2", ("n1", "n2", "n3"), ("n1", "n2", "n3")),)
    # a second candidate that saw epoch 1 too is refused: one leader per epoch
    refused(state, c.StreamElect(k(), "v", "s", 1, "n3"), fx.PRECONDITION_FAILED)
    refused(state, c.StreamElect(k(), "v", "s", 2, "n9"), fx.INVALID_FIELD)  # not a replica
    refused(state, c.StreamElect(k(), "v", "s", 2, "n1", ("n1", "n1")), fx.INVALID_FIELD)
    refused(state, c.StreamElect(k(), "v", "nope", 2, "n1"), fx.NOT_FOUND)
    # a membership change is an epoch too
    state = run(state, c.StreamElect(k(), "v", "s", 2, "n2", ("n2", "n3")))
    assert state.stream("v", "s") == StreamRecord("v", "s", "n2", ("n2", "n3"), 3)


def test_deleting_the_stream_or_its_vhost_drops_the_record():
    state, _, _ = declare(streams_on("v"))
    assert run(state, c.DeleteQueue(k(), "v", "s")).stream("v", "s") is None
    assert run(state, c.DeleteVHost(k(), "v")).stream("v", "s") is None


def test_snapshots_keep_stream_records_and_read_as_before_without_them():
    plain = streams_on("v")
    before = encode_state(plain)
    state, _, _ = declare(plain)
    state = run(state, c.StreamElect(k(), "v", "s", 1, "n3"))
    restored = decode_state(encode_state(state))
    assert restored == state and encode_state(restored) == encode_state(state)
    assert restored.stream("v", "s").epoch == 2
    assert encode_state(decode_state(before)) == before  # no stream: the layout of before
