"""The randomised nemesis against the real compose cluster (chaos_mixed.py): each fault kind
on its own under the mixed workload (quorum, classic and stream queues, metadata changes),
then two short mixed runs of fixed seeds, as CI runs them. `make chaos` runs long ones.

Slow and docker-only, like test_scenarios.py (the same cluster fixture, conftest.py).
"""

from __future__ import annotations

import dataclasses
from urllib.parse import quote

import pytest
from chaos_cluster import NODES
from chaos_mixed import MixedRun
from chaos_nemesis import CLOCK_KINDS, KINDS, SHORT_RUN_KINDS, Step, schedule
from http_json import HttpError

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.timeout(900)]


def run(cluster, seed: int, duration: float, steps=None, audit_to=None) -> MixedRun:
    """`audit_to`: a directory for the Spark audit of the run (chaos_audit.py), or None for none."""
    mixed = MixedRun(cluster, seed, duration, steps=steps, kinds=SHORT_RUN_KINDS)
    mixed.run()
    if audit_to is not None:
        mixed.audit(audit_to)
    if cluster.artifacts is not None:
        mixed.write(cluster.artifacts)
    print("\n" + mixed.text() + "\n" + mixed.row())
    mixed.report.assert_ok()
    drop_queues(cluster, mixed)
    return mixed


def drop_queues(cluster, mixed) -> None:
    """A passing run's queues go: the cluster serves the next test, and forget-rejoin shrinks
    and grows back every replica it finds (with them all kept, 160 s in CI, not 18)."""
    names = {n for w in mixed.workloads.values() for n in (w.queue, w.consume_queue)} | {mixed.rpc.queue}
    for name in sorted(names):
        try:
            cluster.http(cluster.nodes[0], "DELETE", f"/api/queues/%2F/{quote(name, safe='')}", timeout=15)
        except (OSError, HttpError) as e:  # cleanup only: the run itself passed
            print(f"queue {name} not deleted: {e}")


def step_of(kind: str) -> Step:
    """`kind`'s one step (its targets drawn as a schedule draws them), 2 s in, held 5 s."""
    return dataclasses.replace(schedule(11, 60, list(NODES), kinds=(kind,))[0], at=2.0, hold=5.0)


def kind_param(kind: str):
    """A clock kind's test runs with the node whose clock it moves under libfaketime (conftest.py);
    they come last in KINDS, so one such cluster serves both when they move the same node."""
    if kind in CLOCK_KINDS:
        return pytest.param(kind, marks=pytest.mark.faketime([step_of(kind).params["node"]]))
    return kind


@pytest.mark.parametrize("kind", [kind_param(k) for k in KINDS])
def test_each_fault_kind_alone(cluster, kind):
    """One step of `kind`, 2 s into a 12 s run, held 5 s: the fault is applied, healed, and
    every checker passes."""
    assert list(cluster.nodes) == list(NODES)
    steps = [step_of(kind)]
    mixed = run(cluster, 11, 12, steps)
    assert [s.kind for s, _ in mixed.nemesis.applied] == [kind]
    assert any(o.process == "nemesis" for o in cluster.history.ops())
    if kind.startswith("clock-"):
        check_the_node_saw_its_clock_move(cluster, steps[0])
    if kind == "disk-full":
        [full] = [o for o in cluster.history.ops(process="nemesis") if o.f == "disk-full"]
        [clear] = [o for o in cluster.history.ops(process="nemesis") if o.f == "disk-clear"]
        assert full.node == clear.node == steps[0].params["node"]
        assert full.meta["alarm"] is True  # the node raised its disk alarm
        assert sum(clear.meta["fired"].values()) > 0  # the node's writes did meet a full disk
    if kind == "forget-rejoin":
        check_the_node_was_forgotten_and_joined_again(cluster, mixed)
    if kind == "slow-link":  # the node's transport took the delay (tc and iptables fail loudly by themselves)
        [slow] = cluster.history.ops(process="nemesis", f="slow-link")
        params = steps[0].params
        assert params["delay_ms"] > 0
        assert slow.meta["delay"] == {"ms": params["delay_ms"], "jitter_ms": params["jitter_ms"]}


def check_the_node_was_forgotten_and_joined_again(cluster, mixed):
    """Out of the cluster and of every quorum queue, wiped, back as a member (through its
    seeds) and a replica of the workload's quorum queue again; never the classic queue's node."""
    [forget] = cluster.history.ops(process="nemesis", f="forget")
    [rejoin] = cluster.history.ops(process="nemesis", f="rejoin")
    node = forget.node
    assert node == rejoin.node and node not in mixed.nemesis.keep
    assert forget.type == rejoin.type == "ok"
    assert forget.meta["shrunk"] >= 4 and not forget.meta["not_shrunk"]  # quorum, dead-letter (2), rpc
    assert mixed.workloads["quorum"].queue in rejoin.meta["added"]  # (its catching up is in meta["not_in_sync"])
    everyone = sorted(cluster.node_id(n) for n in cluster.nodes)
    for n in cluster.nodes:
        assert sorted(m["node"] for m in cluster.http(n, "GET", "/api/cluster")["members"]) == everyone


def check_the_node_saw_its_clock_move(cluster, step):
    """The node's HTTP API (its Date header, to the second) showed the offset the fault set,
    and the true time after the reset: libfaketime was preloaded and read the file."""
    [fault] = [o for o in cluster.history.ops(process="nemesis") if o.f == step.kind]
    [reset] = [o for o in cluster.history.ops(process="nemesis") if o.f == "clock-reset"]
    assert fault.node == reset.node == step.params["node"]
    if step.kind == "clock-jump":
        expected, slack = step.params["seconds"], 0.9
        assert fault.meta["observed"] == pytest.approx(expected, abs=slack)
    else:  # (rate - 1) s per second from the writer's start (within the fault's op) to the reading
        expected = (step.params["rate"] - 1) * (reset.start - fault.start)
        # a moving offset read through whole-second Date headers (aiohttp's is also cached for a
        # second) and a file the node reads once a second: one run saw 2.0 s for 1.0 expected
        slack = 1.5
    assert reset.meta["observed_before"] == pytest.approx(expected, abs=slack)
    assert reset.meta["observed"] == pytest.approx(0, abs=0.9)


@pytest.mark.parametrize("seed", [101, 202])
def test_short_mixed_run(cluster, seed, tmp_path):
    """Seed 202's run also goes through the Spark audit: its faults drawn on the timeline, the
    partitions it cut seen, conservation agreeing with the checkers."""
    mixed = run(cluster, seed, 60, audit_to=tmp_path if seed == 202 else None)
    assert len(mixed.nemesis.applied) >= 3
    if seed == 202:
        assert mixed.audit_data is not None and mixed.audit_data["events"]
        assert (tmp_path / "audit" / "report.html").read_text().count("<svg") >= 3
