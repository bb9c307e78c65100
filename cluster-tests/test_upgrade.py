"""A rolling upgrade in docker from the previous release to this checkout, under the chaos
workload (upgrade_run.py says what one run does): nothing confirmed is lost on a classic
queue, a quorum queue or a stream while the three nodes are replaced one at a time on their
own volumes, with and without draining each first; the new version's flags stay off until
the last old node is gone and migrate when enabled; the old binary refuses the upgraded data.

The previous release is found by releases.py (the newest v* tag before the working tree's
version, else the release record RELEASES, which every clone has; WARREN_UPGRADE_FROM=<tag
or commit> picks another). Its image is built from `git archive` of that commit with this
checkout's deploy/Dockerfile (chaos_cluster.stage_context "ref:"). The tests never skip for
want of a release: finding it, building its image and running the upgrade each fail with
the step named; only a machine where scripts/ensure-docker.sh cannot run an engine skips.

Two runs, one compose cluster each (1-2 min apiece: 54-122 s at load averages of 15-26):
both upgrade and enable the new flags; `drain` drains before each replacement, rebalances at
the end and tries the downgrade. The tests read the runs' results, so the flag and downgrade
tests cost no cluster of their own. Each run prints
its table (the steps' longest client waits per queue type, the checkers' counts), and the
session's summary repeats them (conftest.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from chaos_cluster import BASE_IMAGE, REPO, build_image
from releases import RECORD_FILE, Release, ReleaseRecordError, previous_release, working_tree_version
from upgrade_run import ORDER, REFUSAL_NODE, DrainUnsupported, UpgradeRun

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def release() -> Release:
    try:
        found = previous_release(REPO)
    except ReleaseRecordError as e:
        pytest.fail(f"step 1, finding the previous release: {e}")
    if found is None:
        pytest.fail("step 1, finding the previous release: no v* tag with another version is reachable from HEAD "
                    f"and {RECORD_FILE} records no release older than {working_tree_version(REPO)} "
                    "(WARREN_UPGRADE_FROM=<commit> runs the test from any commit)")  # fmt: skip
    print(f"upgrading from {found.version} ({found.sha[:12]}, found by {found.found_by})")
    return found


@pytest.fixture(scope="module")
def old_image(release: Release, docker_image: str) -> str:
    tag = f"warren:upgrade-from-{release.sha[:12]}"
    try:
        build_image(tag, BASE_IMAGE, source=f"ref:{release.sha}")
    except Exception as e:
        pytest.fail(f"step 2, building the image of release {release.version} ({release.sha[:12]}): {e}")
    return tag


class Runs:
    """Each variant's run, made once on first use and kept (a failed one keeps its error)."""

    def __init__(self, release: Release, old_image: str, new_image: str, cluster_pool, tmp_path_factory) -> None:
        self.release, self.old_image, self.new_image = release, old_image, new_image
        self.pool, self.tmp = cluster_pool, tmp_path_factory
        self.done: dict[bool, UpgradeRun | BaseException] = {}

    def get(self, drain: bool) -> UpgradeRun:
        if drain not in self.done:
            self.pool.discard()  # one compose cluster at a time on this machine
            name = "upgrade-drain" if drain else "upgrade-no-drain"
            keep = os.environ.get("WARREN_CHAOS_ARTIFACTS")  # pytest's own tmp dirs are removed after 3 sessions
            artifacts = Path(keep) / name if keep else self.tmp.mktemp(name)
            run = UpgradeRun(self.release, self.old_image, self.new_image, drain=drain, refusal=drain,
                             artifacts=artifacts)  # fmt: skip
            try:
                run.execute()
                self.done[drain] = run
            except Exception as e:
                self.done[drain] = e
        found = self.done[drain]
        if isinstance(found, DrainUnsupported):
            pytest.skip(str(found))
        if isinstance(found, BaseException):
            raise AssertionError(f"step 3, the {'drain' if drain else 'no-drain'} upgrade run from "
                                 f"{self.release.version} failed: {found}") from found  # fmt: skip
        return found


@pytest.fixture(scope="module")
def runs(release, old_image, docker_image, cluster_pool, tmp_path_factory) -> Runs:
    return Runs(release, old_image, docker_image, cluster_pool, tmp_path_factory)


@pytest.mark.parametrize("drain", [True, False], ids=["drain", "no-drain"])
def test_a_rolling_upgrade_under_the_chaos_workload_loses_nothing(drain: bool, runs: Runs):
    run = runs.get(drain)
    assert not run.failures(), "\n".join(run.failures()) + "\n" + run.table()
    for qtype in ("quorum", "classic", "stream"):
        q = run.reports[qtype].queue
        assert q.confirmed > 0 and not q.lost, run.table()
    last = run.steps[len(ORDER) - 1]
    assert set(last.versions.values()) == {working_tree_version(REPO)}, last.versions  # all on the working tree
    assert set(run.serving.values()) == {"serving"}, run.serving  # out of maintenance once restarted
    if drain:
        assert all(r["done"] for r in run.drain_reports.values()), run.drain_reports
        assert all(row["ok"] for row in run.rebalanced), run.rebalanced


def test_new_flags_stay_off_while_an_old_node_remains_and_migrate_once_enabled(runs: Runs):
    run = runs.get(drain=False)  # both runs check the flags; this one also runs from a release without drain
    flags = run.flags
    if not flags.new:
        pytest.skip(flags.skipped)
    assert not flags.problems, "\n".join(flags.problems + flags.mixed)
    assert set(flags.refused.values()) == {409}, flags.mixed  # the last check, one old node left
    assert set(flags.new) <= set(flags.enabled)
    for node, listed in flags.files.items():
        assert set(flags.new) <= set(listed), (node, listed)


def test_the_previous_release_refuses_to_start_on_upgraded_data(runs: Runs):
    run = runs.get(drain=True)
    r = run.refusal
    if r.skipped:
        pytest.skip(r.skipped)
    assert r.exit_code == 78, r.message
    assert "refusing to start" in r.message and all(f in r.message for f in r.flags), r.message
    assert r.whole_again, f"the cluster did not converge after {REFUSAL_NODE} came back on the new image"
