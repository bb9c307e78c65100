"""Vhost runtime parameters (feature flag shovels): the `shovel` component
only, refused while the flag is off, gone with their vhost, in snapshots
only when set."""

from __future__ import annotations

from metadata_helpers import cluster, k, refused, run

from amqp import codec
from metadata import commands as c
from metadata import effects as fx
from metadata.feature_flags import SHOVELS
from metadata.machine import apply
from metadata.projections import Projections
from metadata.snapshot import decode_state, encode_state


def enabled():
    return run(cluster("/"), c.EnableFeatureFlag(k(), SHOVELS))


def test_refused_until_the_flag_is_enabled():
    error = refused(cluster("/"), c.SetParameter(k(), "/", "shovel", "s", "{}"), fx.PRECONDITION_FAILED)
    assert SHOVELS in error.description


def test_another_component_or_a_missing_vhost_is_refused_naming_it():
    error = refused(enabled(), c.SetParameter(k(), "/", "federation-upstream", "u", "{}"), fx.INVALID_FIELD)
    assert "'federation-upstream'" in error.description
    error = refused(enabled(), c.SetParameter(k(), "nope", "shovel", "s", "{}"), fx.NOT_FOUND)
    assert "nope" in error.description
    refused(enabled(), c.ClearParameter(k(), "/", "shovel", "s"), fx.NOT_FOUND)


def test_set_replaced_cleared_projected_and_snapshotted():
    state, result, effects = apply(enabled(), c.SetParameter(k(), "/", "shovel", "s", '{"a": 1}'))
    assert result == fx.CREATED and effects == (fx.ParameterSet("/", "shovel", "s", '{"a": 1}'),)
    assert apply(state, c.SetParameter(k(), "/", "shovel", "s", '{"a": 1}'))[2] == ()  # unchanged
    state, result, _ = apply(state, c.SetParameter(k(), "/", "shovel", "s", '{"a": 2}'))
    assert result == fx.OK
    assert Projections.from_state(state).parameters == {("/", "shovel", "s"): '{"a": 2}'}
    data = encode_state(state)
    assert decode_state(data) == state and encode_state(decode_state(data)) == data
    state, _, effects = apply(state, c.ClearParameter(k(), "/", "shovel", "s"))
    assert effects == (fx.ParameterCleared("/", "shovel", "s"),) and not state.parameters


def test_a_deleted_vhost_takes_its_parameters():
    state = run(run(enabled(), c.AddVHost(k(), "v")), c.SetParameter(k(), "v", "shovel", "s", "{}"))
    state, _, effects = apply(state, c.DeleteVHost(k(), "v"))
    assert fx.ParameterCleared("v", "shovel", "s") in effects and not state.parameters


def test_a_state_without_them_is_written_as_before_they_existed():
    assert len(codec.loads(encode_state(enabled()))) == 11
