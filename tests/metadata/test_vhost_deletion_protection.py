"""A vhost protected from deletion (feature flag vhost_deletion_protection,
RabbitMQ 4.1's protected_from_deletion): metadata.set_vhost_deletion_protection
sets and lifts it, DeleteVHost is refused while it holds, an AddVHost that
updates the vhost keeps it, and a snapshot of a state that protects nothing is
written in the format older builds read."""

from __future__ import annotations

from metadata_helpers import cluster, k, refused, run

from amqp import codec
from metadata import commands as c
from metadata import effects as fx
from metadata.feature_flags import VHOST_DEFAULT_QUEUE_TYPE, VHOST_DELETION_PROTECTION
from metadata.machine import apply
from metadata.snapshot import decode_state, encode_state


def enabled():
    return run(cluster("/", "v"), c.EnableFeatureFlag(k(), VHOST_DELETION_PROTECTION))


def test_refused_until_the_flag_is_enabled():
    error = refused(cluster("v"), c.SetVHostDeletionProtection(k(), "v", True), fx.PRECONDITION_FAILED)
    assert VHOST_DELETION_PROTECTION in error.description


def test_a_protected_vhost_is_not_deleted_until_the_protection_is_lifted():
    state, result, effects = apply(enabled(), c.SetVHostDeletionProtection(k(), "v", True))
    assert result == fx.OK and effects == (fx.VHostUpdated("v", protected_from_deletion=True),)
    assert state.vhost("v").record.protected_from_deletion
    error = refused(state, c.DeleteVHost(k(), "v"), fx.PRECONDITION_FAILED)
    assert error.description == "Refusing to delete virtual host 'v' because it is protected from deletion"
    again, result, effects = apply(state, c.SetVHostDeletionProtection(k(), "v", True))
    assert result == fx.OK and effects == () and again.vhost("v") is state.vhost("v")  # already protected
    state, _, effects = apply(state, c.SetVHostDeletionProtection(k(), "v", False))
    assert effects == (fx.VHostUpdated("v", protected_from_deletion=False),)
    state = run(state, c.DeleteVHost(k(), "v"))
    assert state.vhost("v") is None


def test_an_unknown_vhost_is_not_found():
    refused(enabled(), c.SetVHostDeletionProtection(k(), "nope", True), fx.NOT_FOUND)


def test_updating_the_vhost_keeps_its_protection():
    state = run(enabled(), c.EnableFeatureFlag(k(), VHOST_DEFAULT_QUEUE_TYPE))
    state = run(state, c.SetVHostDeletionProtection(k(), "v", True))
    state, _, effects = apply(state, c.AddVHost(k(), "v", "described"))
    assert effects == (fx.VHostUpdated("v", "described", (), "", True),)
    state = run(state, c.AddVHostWithQueueType(k(), "v", "", (), "quorum"))
    assert state.vhost("v").record.protected_from_deletion


def test_snapshot_writes_format_3_only_for_a_protected_vhost():
    state = enabled()

    def records(state):
        return sorted(v[0] for v in codec.loads(encode_state(state))[4])

    assert records(state) == [[1, "/", "", []], [1, "v", "", []]]  # as before: older builds read it
    state = run(state, c.SetVHostDeletionProtection(k(), "v", True))
    assert records(state) == [[1, "/", "", []], [3, "v", "", [], "", True]]
    data = encode_state(state)
    assert decode_state(data) == state and encode_state(decode_state(data)) == data
    state = run(state, c.SetVHostDeletionProtection(k(), "v", False))  # lifted: the older format once more
    assert records(state) == [[1, "/", "", []], [1, "v", "", []]]
