"""Global runtime parameters (feature flag global_parameters): the names
Warren keeps, refused while the flag is off, in snapshots only when set."""

from __future__ import annotations

from metadata_helpers import cluster, k, refused, run

from amqp import codec
from metadata import commands as c
from metadata import effects as fx
from metadata.feature_flags import GLOBAL_PARAMETERS
from metadata.machine import apply
from metadata.projections import Projections
from metadata.snapshot import decode_state, encode_state


def enabled():
    return run(cluster("/"), c.EnableFeatureFlag(k(), GLOBAL_PARAMETERS))


def test_refused_until_the_flag_is_enabled():
    error = refused(cluster("/"), c.SetGlobalParameter(k(), "cluster_name", "c"), fx.PRECONDITION_FAILED)
    assert GLOBAL_PARAMETERS in error.description


def test_an_unknown_name_is_refused_naming_it():
    error = refused(enabled(), c.SetGlobalParameter(k(), "cluster_tags", "x"), fx.INVALID_FIELD)
    assert "'cluster_tags'" in error.description


def test_set_replaced_projected_and_snapshotted():
    state, result, effects = apply(enabled(), c.SetGlobalParameter(k(), "cluster_name", "rabbit@old"))
    assert result == fx.CREATED and effects == (fx.GlobalParameterSet("cluster_name", "rabbit@old"),)
    assert apply(state, c.SetGlobalParameter(k(), "cluster_name", "rabbit@old"))[2] == ()  # unchanged
    state = run(state, c.SetGlobalParameter(k(), "internal_cluster_id", "rabbitmq-cluster-id-x"))
    projections = Projections.from_state(state)
    assert projections.global_parameters == {"cluster_name": "rabbit@old", "internal_cluster_id": "rabbitmq-cluster-id-x"}
    data = encode_state(state)
    assert decode_state(data) == state and encode_state(decode_state(data)) == data


def test_a_state_without_them_is_written_as_before_they_existed():
    assert len(codec.loads(encode_state(enabled()))) == 11
