"""Vhost and user limits in the metadata machine (RabbitMQ's
set_vhost_limits / set_user_limits): validated, replicated as commands,
gone with their vhost or user, kept by snapshots; a snapshot written before
limits existed restores with none."""

from __future__ import annotations

from metadata_helpers import ALL_FLAGS, cluster, k, refused, run

from amqp import codec
from metadata import commands as c
from metadata import effects as fx
from metadata.effects import CREATED, OK
from metadata.feature_flags import VHOST_MAX_QUEUES
from metadata.machine import apply
from metadata.projections import Projections
from metadata.snapshot import decode_state, encode_state
from metadata.state import LimitRecord


def _with_user():
    return run(cluster("/", "v2"), c.PutUser(k(), "alice", "hash"))


def test_set_and_clear_a_vhost_and_a_user_limit():
    state = _with_user()
    state, result, effects = apply(state, c.SetLimit(k(), "vhost", "v2", "max-connections", 5))
    assert result == CREATED and effects == (fx.LimitSet("vhost", "v2", "max-connections", 5),)
    state, result, effects = apply(state, c.SetLimit(k(), "vhost", "v2", "max-connections", 5))
    assert result == OK and effects == ()  # the same again changes nothing
    state = run(state, c.SetLimit(k(), "user", "alice", "max-connections", 0))
    assert state.limits[("vhost", "v2", "max-connections")] == LimitRecord("vhost", "v2", "max-connections", 5)
    state, result, effects = apply(state, c.ClearLimit(k(), "vhost", "v2", "max-connections"))
    assert result == OK and effects == (fx.LimitCleared("vhost", "v2", "max-connections"),)
    assert list(state.limits) == [("user", "alice", "max-connections")]


def test_limits_are_validated():
    state = _with_user()
    refused(state, c.SetLimit(k(), "vhost", "nope", "max-connections", 1), fx.NOT_FOUND)
    refused(state, c.SetLimit(k(), "user", "bob", "max-connections", 1), fx.NOT_FOUND)
    refused(state, c.SetLimit(k(), "vhost", "/", "max-bananas", 1), fx.INVALID_FIELD)
    refused(state, c.SetLimit(k(), "node", "/", "max-connections", 1), fx.INVALID_FIELD)
    refused(state, c.ClearLimit(k(), "vhost", "/", "max-connections"), fx.NOT_FOUND)


def test_deleting_a_vhost_or_user_takes_its_limits():
    state = run(_with_user(), c.SetLimit(k(), "vhost", "v2", "max-connections", 5),
                c.SetLimit(k(), "user", "alice", "max-connections", 1))  # fmt: skip
    state = run(state, c.DeleteVHost(k(), "v2"), c.DeleteUser(k(), "alice"))
    assert not state.limits


def test_snapshots_keep_limits_and_old_snapshots_restore_without_any():
    before = _with_user()
    old_bytes = encode_state(before)  # as written before limits existed: no trailing element
    assert decode_state(old_bytes) == before
    state = run(before, c.SetLimit(k(), "vhost", "/", "max-connections", 3))
    data = encode_state(state)
    assert data != old_bytes
    back = decode_state(data)
    assert back == state and encode_state(back) == data
    assert len(codec.loads(data)) == 12
    # clearing the last limit gives the snapshot layout of before again
    cleared = run(state, c.ClearLimit(k(), "vhost", "/", "max-connections"))
    assert len(codec.loads(encode_state(cleared))) == len(codec.loads(old_bytes)) == 11


def test_projections_follow_limits():
    state = _with_user()
    projections = Projections.from_state(state)
    for cmd in (c.SetLimit(k(), "vhost", "/", "max-connections", 3), c.SetLimit(k(), "user", "alice",
                                                                                 "max-connections", 1)):  # fmt: skip
        state, _, effects = apply(state, cmd)
        projections.apply_effects(effects)
    assert projections.limit("vhost", "/", "max-connections") == 3
    assert projections.limit("user", "alice", "max-connections") == 1
    assert Projections.from_state(state).limits == projections.limits
    state, _, effects = apply(state, c.DeleteUser(k(), "alice"))
    projections.apply_effects(effects)
    assert projections.limit("user", "alice", "max-connections") is None


def test_max_queues_refuses_a_new_queue_once_the_vhost_has_that_many():
    state = run(cluster("/", "v2"), c.EnableFeatureFlag(k(), VHOST_MAX_QUEUES),
                c.SetLimit(k(), "vhost", "v2", "max-queues", 2))  # fmt: skip
    state = run(state, c.DeclareQueue(k(), "v2", "a", leader="n1"), c.DeclareQueue(k(), "v2", "b", leader="n1"))
    refused(state, c.DeclareQueue(k(), "v2", "c", leader="n1"), fx.RESOURCE_LIMIT_EXCEEDED)
    state = run(state, c.DeclareQueue(k(), "v2", "a", leader="n1"), c.DeclareQueue(k(), "/", "elsewhere", leader="n1"))  # redeclare, other vhost
    state = run(state, c.SetLimit(k(), "vhost", "v2", "max-queues", -1), c.DeclareQueue(k(), "v2", "c", leader="n1"))
    state = run(state, c.SetLimit(k(), "vhost", "v2", "max-queues", 0))
    refused(state, c.DeclareQueue(k(), "v2", "d", leader="n1"), fx.RESOURCE_LIMIT_EXCEEDED)


def test_max_queues_needs_its_feature_flag():
    state = cluster("/", flags=tuple(f for f in ALL_FLAGS if f != VHOST_MAX_QUEUES))
    refused(state, c.SetLimit(k(), "vhost", "/", "max-queues", 1), fx.PRECONDITION_FAILED)
