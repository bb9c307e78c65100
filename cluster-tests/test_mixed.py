"""The randomised nemesis against the real compose cluster (chaos_mixed.py): each fault kind
on its own under the mixed workload (quorum, classic and stream queues, metadata changes),
then two short mixed runs of fixed seeds, as CI runs them. `make chaos` runs long ones.

Slow and docker-only, like test_scenarios.py (the same cluster fixture, conftest.py).
"""

from __future__ import annotations

import dataclasses

import pytest
from chaos_mixed import MixedRun
from chaos_nemesis import KINDS, schedule

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.timeout(900)]


def run(cluster, seed: int, duration: float, steps=None) -> MixedRun:
    mixed = MixedRun(cluster, seed, duration, steps=steps)
    mixed.run()
    if cluster.artifacts is not None:
        mixed.write(cluster.artifacts)
    print("\n" + mixed.text() + "\n" + mixed.row())
    mixed.report.assert_ok()
    return mixed


@pytest.mark.parametrize("kind", KINDS)
def test_each_fault_kind_alone(cluster, kind):
    """One step of `kind` (its targets drawn as a schedule draws them), 2 s into a 12 s run,
    held 5 s: the fault is applied, healed, and every checker passes."""
    steps = [dataclasses.replace(schedule(11, 60, cluster.nodes, kinds=(kind,))[0], at=2.0, hold=5.0)]
    mixed = run(cluster, 11, 12, steps)
    assert [s.kind for s, _ in mixed.nemesis.applied] == [kind]
    assert any(o.process == "nemesis" for o in cluster.history.ops())


@pytest.mark.parametrize("seed", [101, 202])
def test_short_mixed_run(cluster, seed):
    mixed = run(cluster, seed, 60)
    assert len(mixed.nemesis.applied) >= 3
