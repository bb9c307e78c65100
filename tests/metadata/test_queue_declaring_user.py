"""A queue's declaring user (feature flag queue_declaring_user):
metadata.declare_queue version 2 records it, a redeclaration keeps the
first, and a snapshot of queues without one is written as before it existed."""

from __future__ import annotations

from metadata_helpers import cluster, k, refused, run

from amqp import codec
from metadata import commands as c
from metadata import effects as fx
from metadata.feature_flags import QUEUE_DECLARING_USER
from metadata.snapshot import decode_state, encode_state


def enabled():
    return run(cluster("v"), c.EnableFeatureFlag(k(), QUEUE_DECLARING_USER))


def test_refused_until_the_flag_is_enabled():
    error = refused(cluster("v"), c.DeclareQueueByUser(k(), "v", "q", leader="n1", user="bob"), fx.PRECONDITION_FAILED)
    assert QUEUE_DECLARING_USER in error.description


def test_the_first_declaration_names_the_user():
    state = run(enabled(), c.DeclareQueueByUser(k(), "v", "q", leader="n1", user="bob"))
    state = run(state, c.DeclareQueueByUser(k(), "v", "q", leader="n1", user="alice"))  # redeclared
    state = run(state, c.DeclareQueue(k(), "v", "old", leader="n1"))  # version 1: no user
    assert state.queue("v", "q").user == "bob" and state.queue("v", "old").user == ""


def test_snapshot_writes_format_1_without_a_user_and_format_2_with_one():
    state = run(enabled(), c.DeclareQueue(k(), "v", "old", leader="n1"),
                c.DeclareQueueByUser(k(), "v", "q", leader="n1", user="bob"))  # fmt: skip
    data = encode_state(state)
    queues = {r[2]: r for r in codec.loads(data)[4][0][2]}
    assert queues["old"][0] == 1 and len(queues["old"]) == 10  # as before: older builds read it
    assert queues["q"][0] == 2 and queues["q"][-1] == "bob"
    assert decode_state(data) == state and encode_state(decode_state(data)) == data
