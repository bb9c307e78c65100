"""The pure metadata machine: vhosts, users, permissions, policies, feature
flags, members, idempotency, and errors as results (never exceptions)."""

from __future__ import annotations

import pytest
from metadata_helpers import ALL_FLAGS, cluster, k, refused, run, step

from amqp.errors import Condition
from metadata import commands as c
from metadata import effects as fx
from metadata import machine
from metadata.effects import CREATED, OK, Error
from metadata.state import MetadataState

NOT_FOUND = Condition.NOT_FOUND
PRECONDITION_FAILED = Condition.PRECONDITION_FAILED
INVALID_FIELD = Condition.INVALID_FIELD


# -- vhosts ----------------------------------------------------------------------


def test_add_vhost_creates_the_builtin_exchanges():
    state, result, effects = step(MetadataState(), c.AddVHost(k(), "/", "default", ("t",)))
    assert result == CREATED and effects == (fx.VHostAdded("/", "default", ("t",)),)
    exchanges = {x.name: x.type for x in state.vhost("/").exchanges.values()}
    assert exchanges == {"": "direct", "amq.direct": "direct", "amq.fanout": "fanout", "amq.topic": "topic",
                         "amq.headers": "headers", "amq.match": "headers"}  # fmt: skip


def test_re_adding_a_vhost_is_ok_and_updates_its_metadata():
    state = cluster("/")
    same, result, effects = step(state, c.AddVHost(k(), "/"))
    assert result == OK and effects == () and same.vhosts == state.vhosts
    new, result, effects = step(state, c.AddVHost(k(), "/", "prod", ("eu",)))
    assert result == OK and effects == (fx.VHostUpdated("/", "prod", ("eu",)),)
    assert new.vhost("/").record.description == "prod" and new.vhost("/").exchanges == state.vhost("/").exchanges
    refused(state, c.AddVHost(k(), ""), INVALID_FIELD)


def test_delete_vhost_removes_everything_in_it():
    state = cluster("/", "other")
    state = run(
        state,
        c.PutUser(k(), "alice", "h"),
        c.SetPermissions(k(), "alice", "/"),
        c.SetPermissions(k(), "alice", "other"),
        c.DeclareExchange(k(), "/", "x", "fanout"),
        c.DeclareQueue(k(), "/", "q1", leader="n1"),
        c.DeclareQueue(k(), "/", "q2", leader="n2"),
        c.DeclareQueue(k(), "other", "q1", leader="n1"),
        c.Bind(k(), "/", "x", "queue", "q1"),
        c.SetPolicy(k(), "/", "p", ".*", definition={"max-length": 1}),
    )
    new, result, effects = step(state, c.DeleteVHost(k(), "/"))
    assert result == OK
    assert set(effects[:-1]) == {
        fx.QueueDeleted("/", "q1", "classic", "n1"),
        fx.QueueDeleted("/", "q2", "classic", "n2"),
    }
    assert effects[-1] == fx.VHostDeleted("/")
    assert new.vhost("/") is None and new.permission("alice", "/") is None
    assert new.permission("alice", "other") is not None and new.queue("other", "q1") is not None
    refused(new, c.DeleteVHost(k(), "/"), NOT_FOUND)
    refused(new, c.DeclareQueue(k(), "/", "q", leader="n1"), NOT_FOUND)
    # A vhost added again under the same name starts empty.
    again = run(new, c.AddVHost(k(), "/"))
    assert len(again.vhost("/").queues) == 0 and again.bindings("/") == []


# -- users and permissions ---------------------------------------------------------


def test_put_user_creates_then_replaces():
    state, result, effects = step(MetadataState(), c.PutUser(k(), "alice", "h1", ("management",)))
    assert result == CREATED and effects == (fx.UserPut("alice", "h1", ("management",)),)
    same, result, effects = step(state, c.PutUser(k(), "alice", "h1", ("management",)))
    assert result == OK and effects == () and same.users == state.users
    new, result, effects = step(state, c.PutUser(k(), "alice", "h2"))
    assert result == OK and effects == (fx.UserPut("alice", "h2", ()),)
    assert new.users["alice"].password_hash == "h2"
    refused(state, c.PutUser(k(), "", "h"), INVALID_FIELD)


def test_delete_user_takes_its_permissions():
    state = run(cluster("/", "v2"), c.PutUser(k(), "alice", "h"), c.PutUser(k(), "bob", "h"),
                c.SetPermissions(k(), "alice", "/"), c.SetPermissions(k(), "alice", "v2"),
                c.SetPermissions(k(), "bob", "/"))  # fmt: skip
    new, result, effects = step(state, c.DeleteUser(k(), "alice"))
    assert result == OK and effects == (fx.UserDeleted("alice"),)
    assert "alice" not in new.users and set(new.permissions) == {("bob", "/")}
    refused(new, c.DeleteUser(k(), "alice"), NOT_FOUND)


def test_permissions():
    state = run(cluster("/"), c.PutUser(k(), "alice", "h"))
    refused(state, c.SetPermissions(k(), "nobody", "/"), NOT_FOUND)
    refused(state, c.SetPermissions(k(), "alice", "nowhere"), NOT_FOUND)
    refused(state, c.SetPermissions(k(), "alice", "/", "(", ".*", ".*"), INVALID_FIELD)
    state, result, effects = step(state, c.SetPermissions(k(), "alice", "/", "^a", "", ".*"))
    assert result == CREATED and effects == (fx.PermissionsSet("alice", "/", "^a", "", ".*"),)
    assert state.permission("alice", "/").configure == "^a"
    same, result, effects = step(state, c.SetPermissions(k(), "alice", "/", "^a", "", ".*"))
    assert result == OK and effects == ()
    state, result, effects = step(state, c.SetPermissions(k(), "alice", "/"))
    assert result == OK and effects == (fx.PermissionsSet("alice", "/", ".*", ".*", ".*"),)
    state, result, effects = step(state, c.ClearPermissions(k(), "alice", "/"))
    assert result == OK and effects == (fx.PermissionsCleared("alice", "/"),) and state.permission("alice", "/") is None
    same, result, effects = step(state, c.ClearPermissions(k(), "alice", "/"))
    assert result == OK and effects == ()
    refused(state, c.ClearPermissions(k(), "alice", "nowhere"), NOT_FOUND)
    refused(state, c.ClearPermissions(k(), "nobody", "/"), NOT_FOUND)


# -- policies ----------------------------------------------------------------------


def test_policies_are_stored():
    state = cluster("/")
    cmd = c.SetPolicy(k(), "/", "ttl", "^q", "queues", {"message-ttl": 5}, 3)
    state, result, effects = step(state, cmd)
    assert result == CREATED
    assert effects == (fx.PolicySet("/", "ttl", "^q", "queues", {"message-ttl": 5}, 3),)
    assert state.vhost("/").policies["ttl"].definition_map == {"message-ttl": 5}
    same, result, effects = step(state, c.SetPolicy(k(), "/", "ttl", "^q", "queues", {"message-ttl": 5}, 3))
    assert result == OK and effects == ()
    state, result, effects = step(state, c.SetPolicy(k(), "/", "ttl", "^q", "all", {"message-ttl": 6}, 3))
    assert result == OK and len(effects) == 1
    refused(state, c.SetPolicy(k(), "nowhere", "p", ".*", definition={"a": 1}), NOT_FOUND)
    refused(state, c.SetPolicy(k(), "/", "p", "[", definition={"a": 1}), INVALID_FIELD)
    refused(state, c.SetPolicy(k(), "/", "p", ".*", "everything", {"a": 1}), INVALID_FIELD)
    refused(state, c.SetPolicy(k(), "/", "p", ".*"), INVALID_FIELD)  # empty definition
    refused(state, c.SetPolicy(k(), "/", "", ".*", definition={"a": 1}), INVALID_FIELD)
    refused(state, c.SetPolicy(k(), "/", "p", ".*", definition={"a": 1}, priority=-1), INVALID_FIELD)
    state, result, effects = step(state, c.ClearPolicy(k(), "/", "ttl"))
    assert result == OK and effects == (fx.PolicyCleared("/", "ttl"),) and not state.vhost("/").policies
    refused(state, c.ClearPolicy(k(), "/", "ttl"), NOT_FOUND)
    refused(state, c.ClearPolicy(k(), "nowhere", "ttl"), NOT_FOUND)


def test_operator_policies_are_a_namespace_of_their_own_behind_a_feature_flag():
    state = cluster("/")
    cap = c.SetOperatorPolicy(k(), "/", "ttl", "^q", "queues", {"max-length": 5}, 1)
    refused(state, cap, Condition.PRECONDITION_FAILED)  # the flag is not enabled yet
    state = run(state, c.EnableFeatureFlag(k(), "operator_policies"),
                c.SetPolicy(k(), "/", "ttl", "^q", "queues", {"message-ttl": 5}))  # fmt: skip
    state, result, effects = step(state, cap)
    assert result == CREATED and effects == (fx.PolicySet("/", "ttl", "^q", "queues", {"max-length": 5}, 1, True),)
    vh = state.vhost("/")
    assert vh.operator_policies["ttl"].definition_map == {"max-length": 5}
    assert vh.policies["ttl"].definition_map == {"message-ttl": 5}
    state, result, effects = step(state, c.ClearOperatorPolicy(k(), "/", "ttl"))
    assert effects == (fx.PolicyCleared("/", "ttl", True),)
    assert not state.vhost("/").operator_policies and "ttl" in state.vhost("/").policies
    refused(state, c.ClearOperatorPolicy(k(), "/", "ttl"), NOT_FOUND)


def test_topic_permissions_are_kept_per_exchange_and_go_with_their_user_or_vhost():
    state = run(cluster("/", "v"), c.PutUser(k(), "u", "h"), c.PutUser(k(), "w", "h"))
    set_eu = c.SetTopicPermissions(k(), "u", "/", "amq.topic", "^eu\\.", "^eu\\.")
    refused(state, set_eu, Condition.PRECONDITION_FAILED)  # the flag is not enabled yet
    state = run(state, c.EnableFeatureFlag(k(), "topic_permissions"))
    state, result, effects = step(state, set_eu)
    assert result == CREATED and effects == (fx.TopicPermissionsSet("u", "/", "amq.topic", "^eu\\.", "^eu\\."),)
    refused(state, c.SetTopicPermissions(k(), "u", "/", "x", "("), INVALID_FIELD)
    refused(state, c.SetTopicPermissions(k(), "nobody", "/", "x"), NOT_FOUND)
    state = run(state, c.SetTopicPermissions(k(), "u", "/", "logs"), c.SetTopicPermissions(k(), "u", "v", "x"),
                c.SetTopicPermissions(k(), "w", "/", "x"))  # fmt: skip
    state, result, effects = step(state, c.ClearTopicPermissions(k(), "u", "/"))  # every exchange of u in /
    assert {e.exchange for e in effects} == {"amq.topic", "logs"}
    assert set(state.topic_permissions) == {("u", "v", "x"), ("w", "/", "x")}
    refused(state, c.ClearTopicPermissions(k(), "u", "/"), NOT_FOUND)
    state = run(state, c.DeleteUser(k(), "w"), c.DeleteVHost(k(), "v"))
    assert not state.topic_permissions


# -- feature flags and members -------------------------------------------------------


def test_feature_flag_is_refused_while_a_member_lacks_it():
    state = run(MetadataState(), c.AddMember(k(), "n1", "0.2.0", ALL_FLAGS),
                c.AddMember(k(), "n2", "0.1.0", ("credit_api_v2",)))  # fmt: skip
    result = refused(state, c.EnableFeatureFlag(k(), "quorum_queue_v1"), PRECONDITION_FAILED)
    assert "n2" in result.description and "n1" not in result.description
    # n2 restarts on the new version and reports it.
    state, result, effects = step(state, c.AddMember(k(), "n2", "0.2.0", ALL_FLAGS))
    assert result == OK and effects == (fx.MemberUpdated("n2", "0.2.0", tuple(sorted(ALL_FLAGS))),)
    state, result, effects = step(state, c.EnableFeatureFlag(k(), "quorum_queue_v1"))
    assert result == CREATED and effects == (fx.FeatureFlagEnabled("quorum_queue_v1"),)
    assert state.flag_enabled("quorum_queue_v1")
    same, result, effects = step(state, c.EnableFeatureFlag(k(), "quorum_queue_v1"))
    assert result == OK and effects == ()
    # An old node can no longer join, nor a member downgrade.
    result = refused(state, c.AddMember(k(), "n3", "0.1.0", ("credit_api_v2",)), PRECONDITION_FAILED)
    assert "quorum_queue_v1" in result.description
    refused(state, c.AddMember(k(), "n2", "0.1.0", ("credit_api_v2",)), PRECONDITION_FAILED)


def test_feature_flag_needs_members_and_a_name():
    refused(MetadataState(), c.EnableFeatureFlag(k(), "credit_api_v2"), PRECONDITION_FAILED)
    refused(cluster(), c.EnableFeatureFlag(k(), ""), INVALID_FIELD)
    # A flag no member knows is simply unsupported.
    refused(cluster(), c.EnableFeatureFlag(k(), "from_the_future"), PRECONDITION_FAILED)


def test_enabled_flags_stay_sorted():
    state = run(cluster(), *(c.EnableFeatureFlag(k(), f) for f in reversed(ALL_FLAGS)))
    assert state.feature_flags == tuple(sorted(ALL_FLAGS))


def test_members():
    state, result, effects = step(MetadataState(), c.AddMember(k(), "n1", "0.1.0", ["b", "a", "a"]))
    assert result == CREATED and effects == (fx.MemberAdded("n1", "0.1.0", ("a", "b")),)
    same, result, effects = step(state, c.AddMember(k(), "n1", "0.1.0", ("a", "b")))
    assert result == OK and effects == ()
    refused(state, c.AddMember(k(), "", "0.1.0"), INVALID_FIELD)
    state, result, effects = step(state, c.RemoveMember(k(), "n1"))
    assert result == OK and effects == (fx.MemberRemoved("n1"),) and not state.members
    refused(state, c.RemoveMember(k(), "n1"), NOT_FOUND)


def test_noop_changes_nothing():
    state = cluster("/")
    for cmd in (c.Fence(), c.Fence(""), c.Fence()):
        new, result, effects = step(state, cmd)
        assert result == OK and effects == () and new is state
    new, result, _ = step(state, c.Fence("fence-1"))
    assert result == OK and new.recent_result("fence-1") is not None


def test_bootstrap_sets_up_a_blank_store_only():
    boot = c.Bootstrap(k(), "/", "the default", "guest", "hash", ("administrator",))
    state, result, effects = step(MetadataState(), boot)
    assert result == CREATED and "/" in state.vhosts and state.users["guest"].password_hash == "hash"
    assert state.permissions[("guest", "/")].configure == ".*"
    assert [type(e) for e in effects] == [fx.VHostAdded, fx.UserPut, fx.PermissionsSet]
    # a second node's bootstrap, or one after an operator changed things, does nothing
    again, result, effects = step(state, c.Bootstrap(k(), "/", "", "guest", "other-hash"))
    assert result == OK and effects == () and again.users["guest"].password_hash == "hash"
    state, _, _ = step(state, c.DeleteUser(k(), "guest"))
    assert step(state, c.Bootstrap(k(), "/", "", "guest", "other-hash"))[1] == OK  # a vhost remains


# -- idempotency -------------------------------------------------------------------


def _every_command(state: MetadataState):
    """One command of each kind that succeeds in turn from `state`."""
    return [
        c.AddVHost(k(), "v"),
        c.PutUser(k(), "u", "h"),
        c.SetPermissions(k(), "u", "v"),
        c.ClearPermissions(k(), "u", "v"),
        c.DeclareExchange(k(), "v", "x", "topic"),
        c.DeclareQueue(k(), "v", "q", leader="n1"),
        c.EnableFeatureFlag(k(), "warren_metadata_raft_v1"),
        c.EnableFeatureFlag(k(), "quorum_queue_v1"),
        c.DeclareQueue(k(), "v", "qq", "quorum", leader="n1", replicas=("n1",)),
        c.SetQueueReplicas(k(), "v", "qq", ("n1", "n2")),
        c.EnableFeatureFlag(k(), "stream_queue"),
        c.EnableFeatureFlag(k(), "stream_replication"),
        c.DeclareQueue(k(), "v", "s", "stream", leader="n1", replicas=("n1", "n2")),
        c.StreamElect(k(), "v", "s", 1, "n2"),
        c.Bind(k(), "v", "x", "queue", "q", "a.#"),
        c.Unbind(k(), "v", "x", "queue", "q", "a.#"),
        c.SetPolicy(k(), "v", "p", ".*", definition={"max-length": 3}),
        c.ClearPolicy(k(), "v", "p"),
        c.SetLimit(k(), "vhost", "v", "max-connections", 10),
        c.ClearLimit(k(), "vhost", "v", "max-connections"),
        c.EnableFeatureFlag(k(), "operator_policies"),
        c.SetOperatorPolicy(k(), "v", "p", ".*", definition={"max-length": 3}),
        c.ClearOperatorPolicy(k(), "v", "p"),
        c.EnableFeatureFlag(k(), "topic_permissions"),
        c.SetTopicPermissions(k(), "u", "v", "x", "^a"),
        c.ClearTopicPermissions(k(), "u", "v"),
        c.EnableFeatureFlag(k(), "vhost_default_queue_type"),
        c.AddVHostWithQueueType(k(), "v", "", (), "quorum"),
        c.EnableFeatureFlag(k(), "global_parameters"),
        c.SetGlobalParameter(k(), "cluster_name", "c1"),
        c.EnableFeatureFlag(k(), "vhost_deletion_protection"),
        c.SetVHostDeletionProtection(k(), "v", True),
        c.SetVHostDeletionProtection(k(), "v", False),
        c.EnableFeatureFlag(k(), "queue_declaring_user"),
        c.DeclareQueueByUser(k(), "v", "by-u", leader="n1", user="u"),
        c.EnableFeatureFlag(k(), "shovels"),
        c.SetParameter(k(), "v", "shovel", "s", "{}"),
        c.ClearParameter(k(), "v", "shovel", "s"),
        c.DeleteQueue(k(), "v", "q"),
        c.DeleteExchange(k(), "v", "x"),
        c.EnableFeatureFlag(k(), "credit_api_v2"),
        c.AddMember(k(), "n3", "0.1.0", ALL_FLAGS),
        c.RemoveMember(k(), "n3"),
        c.DeleteUser(k(), "u"),
        c.DeleteVHost(k(), "v"),
        c.Fence(k()),
        c.Bootstrap(k(), "/", "", "guest", "h"),
    ]


def test_every_command_is_applied_at_most_once():
    state = cluster()
    cmds = _every_command(state)
    assert {type(cmd) for cmd in cmds} == set(c.COMMANDS)
    for cmd in cmds:
        state, first, effects = step(state, cmd)
        assert first.ok, (cmd, first)
        again, second, more = step(state, cmd)
        assert second == first and more == () and again is state, cmd


def test_a_retried_error_gets_the_same_error():
    state = cluster()
    cmd = c.DeclareQueue(k(), "v", "q", leader="n1")
    state, first, _ = step(state, cmd)
    assert first.condition == NOT_FOUND
    state = run(state, c.AddVHost(k(), "v"))
    again, second, effects = step(state, cmd)
    assert second == first and effects == () and again is state
    assert state.queue("v", "q") is None


def test_a_key_reused_for_another_command_is_refused():
    state = run(cluster(), c.AddVHost("same", "v"))
    refused(state, c.AddVHost("same", "w"), PRECONDITION_FAILED)
    assert state.vhost("w") is None


def test_remembered_keys_are_bounded():
    state = cluster().replace(recent_limit=3)
    first = c.AddVHost(k(), "v")
    state = run(state, first, c.DeleteVHost(k(), "v"))
    # Still remembered: a retry changes nothing.
    assert step(state, first)[0] is state
    for _ in range(6):
        state = run(state, c.Fence(k()))
    assert len(state.recent) + len(state.recent_previous) <= 2 * 3
    assert state.recent_result(first.idempotency_key) is None
    # Forgotten: applied again.
    assert step(state, first)[0].vhost("v") is not None


# -- errors are results --------------------------------------------------------------


def test_fields_of_the_wrong_type_are_an_error_result():
    state = cluster("/")
    for cmd in (
        c.DeclareQueue(k(), "/", "q", durable="yes", leader="n1"),
        c.DeclareQueue(k(), "/", 5, leader="n1"),
        c.AddVHost(None, "v"),
        c.SetPolicy(k(), "/", "p", ".*", definition={"a": 1}, priority="high"),
        c.AddMember(k(), "n3", "0.1.0", (1, 2)),
        c.SetPolicy(k(), "/", "p", ".*", definition={"a": 1}, priority=2**64),
    ):
        new, result, effects = step(state, cmd)
        assert result.condition == INVALID_FIELD and new is state and effects == ()


def test_undecodable_arguments_are_an_error_result():
    state = cluster("/")
    for cmd in (
        c.DeclareQueue(k(), "/", "q", arguments=b"\xff", leader="n1"),
        c.DeclareExchange(k(), "/", "x", arguments=b""),
        c.Bind(k(), "/", "amq.direct", "queue", "q", arguments=c.pack({}) + b"junk"),
        c.SetPolicy(k(), "/", "p", ".*", definition=b"\x40"),  # null, not a map
    ):
        refused(state, cmd, INVALID_FIELD)


def test_not_a_metadata_command():
    state = cluster()
    new, result, effects = machine.apply(state, object())
    assert result.condition == Condition.NOT_IMPLEMENTED and new is state


def test_a_bug_is_an_internal_error_and_keeps_the_state(monkeypatch):
    def broken(state, cmd):
        raise KeyError("oops")

    monkeypatch.setitem(machine._HANDLERS, c.AddVHost, broken)
    state = cluster()
    cmd = c.AddVHost(k(), "v")
    new, result, effects = machine.apply(state, cmd)
    assert isinstance(result, Error) and result.condition == Condition.INTERNAL_ERROR and effects == ()
    assert new.vhosts is state.vhosts


@pytest.mark.parametrize("cmd", [c.DeleteVHost("k", "v"), c.DeleteUser("k", "u"), c.RemoveMember("k", "n")])
def test_deleting_what_does_not_exist_is_not_found(cmd):
    refused(MetadataState(), cmd, NOT_FOUND)
