"""The local feature-flag registry, and how nodes' reports meet the machine."""

from __future__ import annotations

import pytest
from metadata_helpers import k, refused, run

from amqp.errors import Condition
from metadata import commands as c
from metadata.feature_flags import (
    CONSISTENT_HASH_EXCHANGE,
    CREDIT_API_V2,
    DELAYED_MESSAGE_EXCHANGE,
    EXCHANGE_POLICIES,
    FLAGS,
    GLOBAL_PARAMETERS,
    OPERATOR_POLICIES,
    QUEUE_DECLARING_USER,
    QUEUE_PROXY_RECORDS,
    QUORUM_CONSUMER_TIMEOUT,
    QUORUM_PUBLISHER_FLOW,
    QUORUM_QUEUE_POLICIES,
    QUORUM_QUEUE_PRIORITIES,
    QUORUM_QUEUE_PUBLISH_BATCH,
    QUORUM_QUEUE_V1,
    QUORUM_TICK_CLOCK,
    SHOVELS,
    STREAM_COMMIT_NOTICES,
    STREAM_QUEUE,
    STREAM_REPLICATION,
    TOPIC_PERMISSIONS,
    VHOST_DEFAULT_QUEUE_TYPE,
    VHOST_DELETION_PROTECTION,
    VHOST_MAX_QUEUES,
    WARREN_METADATA_RAFT_V1,
    FeatureFlag,
    FeatureFlagRegistry,
    local_member,
)
from metadata.state import MetadataState
from node import __version__


def test_warrens_first_flags():
    assert [f.name for f in FLAGS] == [WARREN_METADATA_RAFT_V1, CREDIT_API_V2, QUORUM_QUEUE_V1, OPERATOR_POLICIES,
                                       TOPIC_PERMISSIONS, QUORUM_QUEUE_POLICIES, VHOST_MAX_QUEUES,
                                       QUORUM_QUEUE_PRIORITIES, QUORUM_QUEUE_PUBLISH_BATCH,
                                       EXCHANGE_POLICIES, QUEUE_PROXY_RECORDS, STREAM_QUEUE, STREAM_REPLICATION,
                                       QUORUM_PUBLISHER_FLOW, STREAM_COMMIT_NOTICES, VHOST_DEFAULT_QUEUE_TYPE,
                                       GLOBAL_PARAMETERS, QUORUM_CONSUMER_TIMEOUT, CONSISTENT_HASH_EXCHANGE,
                                       VHOST_DELETION_PROTECTION, QUEUE_DECLARING_USER,
                                       DELAYED_MESSAGE_EXCHANGE, SHOVELS, QUORUM_TICK_CLOCK]  # fmt: skip
    qq = FLAGS.get(QUORUM_QUEUE_V1)
    assert qq.stability == "stable" and qq.supported and qq.introduced_in == "0.1.0"
    assert FLAGS.supported() == (CONSISTENT_HASH_EXCHANGE, CREDIT_API_V2, DELAYED_MESSAGE_EXCHANGE, EXCHANGE_POLICIES, GLOBAL_PARAMETERS, OPERATOR_POLICIES,
                                 QUEUE_DECLARING_USER, QUEUE_PROXY_RECORDS, QUORUM_CONSUMER_TIMEOUT, QUORUM_PUBLISHER_FLOW,
                                 QUORUM_QUEUE_POLICIES, QUORUM_QUEUE_PRIORITIES,
                                 QUORUM_QUEUE_PUBLISH_BATCH, QUORUM_QUEUE_V1, QUORUM_TICK_CLOCK, SHOVELS, STREAM_COMMIT_NOTICES, STREAM_QUEUE,
                                 STREAM_REPLICATION, TOPIC_PERMISSIONS, VHOST_DEFAULT_QUEUE_TYPE,
                                 VHOST_DELETION_PROTECTION, VHOST_MAX_QUEUES, WARREN_METADATA_RAFT_V1)  # fmt: skip
    assert FLAGS.default_enabled() == (WARREN_METADATA_RAFT_V1, CREDIT_API_V2, QUORUM_QUEUE_V1, OPERATOR_POLICIES,
                                       TOPIC_PERMISSIONS, QUORUM_QUEUE_POLICIES, VHOST_MAX_QUEUES,
                                       QUORUM_QUEUE_PRIORITIES, QUORUM_QUEUE_PUBLISH_BATCH,
                                       EXCHANGE_POLICIES, QUEUE_PROXY_RECORDS, STREAM_QUEUE, STREAM_REPLICATION,
                                       QUORUM_PUBLISHER_FLOW, STREAM_COMMIT_NOTICES, VHOST_DEFAULT_QUEUE_TYPE,
                                       GLOBAL_PARAMETERS, QUORUM_CONSUMER_TIMEOUT, CONSISTENT_HASH_EXCHANGE, VHOST_DELETION_PROTECTION,
                                       QUEUE_DECLARING_USER, DELAYED_MESSAGE_EXCHANGE, SHOVELS, QUORUM_TICK_CLOCK)  # fmt: skip
    assert FLAGS.plan_enable(QUORUM_QUEUE_V1) == (WARREN_METADATA_RAFT_V1, QUORUM_QUEUE_V1)
    assert QUORUM_QUEUE_V1 in FLAGS and "nope" not in FLAGS and FLAGS.get("nope") is None
    with pytest.raises(KeyError):
        FLAGS.plan_enable("nope")


def test_registry_checks_its_declarations():
    flag = FeatureFlag("a", "A", "stable", "0.1.0")
    with pytest.raises(ValueError):
        FeatureFlagRegistry([flag, flag])
    with pytest.raises(ValueError):
        FeatureFlagRegistry([FeatureFlag("b", "B", "stable", "0.1.0", depends_on=("a",)), flag])
    with pytest.raises(ValueError):
        FeatureFlag("c", "C", "beta", "0.1.0")


def test_local_member_reports_version_and_supported_flags():
    cmd = local_member("n1", __version__)
    assert isinstance(cmd, c.AddMember) and cmd.node == "n1" and cmd.version == __version__
    assert cmd.supported_flags == FLAGS.supported() and cmd.idempotency_key
    assert local_member("n1", __version__).idempotency_key != cmd.idempotency_key
    assert local_member("n1", __version__, idempotency_key="fixed").idempotency_key == "fixed"


def test_a_rolling_upgrade_enables_a_flag_once_every_node_supports_it():
    quorum = FeatureFlag(QUORUM_QUEUE_V1, "QQ", "stable", "0.2.0", depends_on=(WARREN_METADATA_RAFT_V1,))
    lacking = FeatureFlag(QUORUM_QUEUE_V1, "QQ", "stable", "0.2.0", supported=False,
                          depends_on=(WARREN_METADATA_RAFT_V1,))  # fmt: skip
    old = FeatureFlagRegistry([*FLAGS][:2] + [lacking])
    new = FeatureFlagRegistry([*FLAGS][:2] + [quorum])
    state = run(MetadataState(), local_member("n1", "0.1.0", old), local_member("n2", "0.1.0", old), local_member("n3", "0.1.0", old))
    state = run(state, *(c.EnableFeatureFlag(k(), f) for f in old.default_enabled()))
    for node in ("n1", "n2"):
        state = run(state, local_member(node, "0.2.0", new))
        refused(state, c.EnableFeatureFlag(k(), QUORUM_QUEUE_V1), Condition.PRECONDITION_FAILED)
    state = run(state, local_member("n3", "0.2.0", new), c.EnableFeatureFlag(k(), QUORUM_QUEUE_V1), c.AddVHost(k(), "/"))
    state = run(state, c.DeclareQueue(k(), "/", "qq", "quorum", leader="n1", replicas=("n1", "n2", "n3")))
    assert state.queue("/", "qq").replicas == ("n1", "n2", "n3")
    # A node still on the old version can no longer (re)join.
    refused(state, local_member("n4", "0.1.0", old), Condition.PRECONDITION_FAILED)
