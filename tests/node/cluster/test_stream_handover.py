"""Draining a stream's leader on three `warren server` processes: the
leadership moves to an in-sync replica while a publisher on another node
publishes throughout, and nothing confirmed is lost."""

from __future__ import annotations

import json
import threading

import pytest
from confirmed_sends import publish_until_stopped
from stream_logs import chunks_on, declare, ids_on, info, leader_of, same_everywhere, url

pytestmark = pytest.mark.slow


def test_drain_hands_a_stream_leadership_to_an_in_sync_replica_and_loses_nothing_confirmed(cluster):
    declare(cluster, 0, "s-drain")
    old = cluster.wait_for(lambda: leader_of(cluster, "s-drain"), 10, "the stream's leader")
    pub = next(i for i in range(3) if i != old)
    confirmed: list[int] = []
    stop = threading.Event()
    thread = threading.Thread(target=publish_until_stopped, daemon=True,
                              args=(url(cluster[pub]), "/queues/s-drain", stop, confirmed))  # fmt: skip
    thread.start()
    cluster.wait_for(lambda: len(confirmed) >= 200, 30, "200 confirmed before the drain")
    result = cluster.ctl(old, "--json", "drain")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    drained_at = len(confirmed)
    moved = {s["name"]: s["new_leader"] for s in report["streams_moved"]}
    assert report["done"] is True and report["streams_still_leading"] == []
    assert moved["s-drain"] in {n.id for n in cluster.nodes} - {cluster[old].id}
    cluster.wait_for(lambda: len(confirmed) >= drained_at + 200, 30, "publishing went on through the new leader")
    stop.set()
    thread.join(30)
    new = leader_of(cluster, "s-drain")
    assert cluster[new].id == moved["s-drain"]
    assert info(cluster[new], "s-drain")["epoch"] == 2
    cluster.wait_for(lambda: same_everywhere(cluster, "s-drain"), 30, "identical logs")
    stored = ids_on(cluster[old], "s-drain")  # the drained node follows the new leader
    assert not set(confirmed) - set(stored)
    assert stored == sorted(set(stored))  # in the order sent, each once
    offsets = [c[:2] for c in chunks_on(cluster[new], "s-drain")]
    assert all(a[0] + a[1] == b[0] for a, b in zip(offsets, offsets[1:], strict=False))  # dense offsets
