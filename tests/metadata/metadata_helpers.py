"""Shared helpers for the metadata machine tests."""

from __future__ import annotations

import itertools

from metadata import commands as c
from metadata.effects import Error
from metadata.feature_flags import (
    CONSISTENT_HASH_EXCHANGE,
    CREDIT_API_V2,
    DELAYED_MESSAGE_EXCHANGE,
    EXCHANGE_POLICIES,
    GLOBAL_PARAMETERS,
    OPERATOR_POLICIES,
    QUEUE_DECLARING_USER,
    QUEUE_PROXY_RECORDS,
    QUORUM_QUEUE_POLICIES,
    QUORUM_QUEUE_PRIORITIES,
    QUORUM_QUEUE_PUBLISH_BATCH,
    QUORUM_QUEUE_V1,
    SHOVELS,
    STREAM_QUEUE,
    STREAM_REPLICATION,
    TOPIC_PERMISSIONS,
    VHOST_DEFAULT_QUEUE_TYPE,
    VHOST_DELETION_PROTECTION,
    VHOST_MAX_QUEUES,
    WARREN_METADATA_RAFT_V1,
)
from metadata.machine import apply
from metadata.state import MetadataState

ALL_FLAGS = (CONSISTENT_HASH_EXCHANGE, CREDIT_API_V2, DELAYED_MESSAGE_EXCHANGE, EXCHANGE_POLICIES, GLOBAL_PARAMETERS, OPERATOR_POLICIES, QUEUE_PROXY_RECORDS, QUORUM_QUEUE_POLICIES,
             QUORUM_QUEUE_PRIORITIES, QUORUM_QUEUE_PUBLISH_BATCH, QUORUM_QUEUE_V1, SHOVELS, STREAM_QUEUE, STREAM_REPLICATION,
             TOPIC_PERMISSIONS, VHOST_DEFAULT_QUEUE_TYPE, VHOST_DELETION_PROTECTION,
             QUEUE_DECLARING_USER, VHOST_MAX_QUEUES, WARREN_METADATA_RAFT_V1)  # fmt: skip
_keys = itertools.count()


def k() -> str:
    """A fresh idempotency key."""
    return f"key-{next(_keys)}"


def step(state: MetadataState, cmd):
    return apply(state, cmd)


def run(state: MetadataState, *cmds) -> MetadataState:
    """Apply commands that must all succeed."""
    for cmd in cmds:
        state, result, _ = apply(state, cmd)
        assert result.ok, (cmd, result)
    return state


def refused(state: MetadataState, cmd, condition: str) -> Error:
    """Apply a command that must fail with `condition`, changing nothing but
    the remembered key."""
    new, result, effects = apply(state, cmd)
    assert isinstance(result, Error) and result.condition == condition, result
    assert effects == ()
    assert new.replace(recent=state.recent, recent_previous=state.recent_previous) == state
    return result


def cluster(*vhosts: str, members=("n1", "n2"), flags=ALL_FLAGS) -> MetadataState:
    """Members supporting every flag, and the given vhosts."""
    state = MetadataState()
    for node in members:
        state = run(state, c.AddMember(k(), node, "0.1.0", flags))
    for name in vhosts:
        state = run(state, c.AddVHost(k(), name))
    return state
