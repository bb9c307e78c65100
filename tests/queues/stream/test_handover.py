"""Handing a stream's leadership over, on one event loop with real files
(the Router of test_replication.py): a held leader writes nothing more, the
replica chosen has all of its log once it is all committed, the publishes
that waited are released when the leader closes (their publishers send
them again to the new one), and a failover passes a drained node over."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from node.vhosts.stream_failover import _choose
from node.vhosts.stream_handover import StreamHandOver
from queues.base import Outcome
from queues.stream.queue import StreamQueue
from tests.queues.stream.stream_fakes import Host
from tests.queues.stream.test_replication import Router, make, publish, until


class _Transport:
    def __init__(self, down: set[str]) -> None:
        self.down = down

    def is_connected(self, peer: str) -> bool:
        return peer not in self.down


class _Node:
    """What StreamHandOver._in_sync reads of its node: which peers are connected."""

    def __init__(self, down: set[str]) -> None:
        self.cluster = type("Cluster", (), {"transport": _Transport(down)})()


def test_a_held_leader_writes_nothing_more_and_a_caught_up_replica_is_chosen(tmp_path):
    async def main():
        router = Router()
        queue = make(tmp_path, router)
        _, done = await publish(queue, 100)
        await done.wait()
        queue.hold()
        waiting, _ = await publish(queue, 7, 100)
        handover = StreamHandOver(_Node(down={"b"}), None)
        await until(lambda: handover._in_sync(queue, set()) is not None, "a replica has the whole log")
        assert handover._in_sync(queue, set()) == "c"  # b is not connected
        assert queue.log.next_offset == 100 and queue.committed_end == 100 and waiting == []
        assert handover._in_sync(queue, {"c"}) == "c"  # in maintenance too, but the only one
        closed = asyncio.Event()
        queue.close(closed.set)
        await closed.wait()
        assert waiting == [Outcome.RELEASED] * 7  # never written: the publishers send them again

    asyncio.run(main())


def test_a_released_hold_writes_what_waited(tmp_path):
    async def main():
        router = Router()
        queue = make(tmp_path, router)
        queue.hold()
        outcomes, done = await publish(queue, 10)
        await asyncio.sleep(0.05)
        assert queue.log.next_offset == 0 and outcomes == []
        queue.release()
        await done.wait()
        assert outcomes == [Outcome.ACCEPTED] * 10 and queue.log.next_offset == 10

    asyncio.run(main())


def test_a_failover_passes_over_a_drained_replica_unless_it_alone_has_the_longest_log():
    logs = {"a": (3, 100), "b": (3, 100), "c": (2, 120)}
    assert _choose(logs, set()) == "b"  # the newest log epoch first, then the id
    assert _choose(logs, {"b"}) == "a"
    assert _choose({"a": (3, 90), "b": (3, 100)}, {"b"}) == "b"  # a might lack a committed chunk


def test_streams_with_one_copy_are_reported_as_having_no_successor(tmp_path):
    """One replica, or declared before flag stream_replication (no role): nothing to hand over to."""

    async def main():
        one = make(tmp_path, Router(), replicas=("a",))
        unreplicated = StreamQueue("/", "old", {}, str(tmp_path / "old"), Host(), asyncio.get_running_loop())
        node = _Node(down=set())
        node.vhosts = {"/": SimpleNamespace(queues={"s": one, "old": unreplicated})}
        report = (await StreamHandOver(node, None).hand_over(1.0, set())).as_dict()
        assert report == {"streams_moved": [], "streams_still_leading": [],
                          "streams_no_successor": [{"vhost": "/", "name": "old"}, {"vhost": "/", "name": "s"}]}
        for queue in (one, unreplicated):
            closed = asyncio.Event()
            queue.close(closed.set)
            await closed.wait()

    asyncio.run(main())


def test_a_replica_stopped_for_an_election_that_never_comes_has_its_reachable_leader_re_elected(tmp_path,
                                                                                                 monkeypatch):  # fmt: skip
    """b answered a candidate's stop (fenced), the candidate's election never came, and b reaches
    its leader again: once the fence is overdue b's node proposes that leader for epoch 2 (of
    it and a late election the metadata applies one), and proposes nothing while it is not."""
    from node.vhosts import stream_failover
    from queues.stream import replica as replica_module

    monkeypatch.setattr(replica_module, "FENCE_S", 0.2)

    async def main():
        router = Router()
        make(tmp_path, router)
        b = router.replicas["b"]
        proposed: list = []

        class Metadata:
            async def run(self, command):
                proposed.append(command)

        loop = asyncio.get_running_loop()
        node = _Node(set())
        node.node_id, node.loop, node.metadata = "b", loop, Metadata()
        node.placement = SimpleNamespace(nodes_in_maintenance=set)
        node.background = lambda coro, what: loop.create_task(coro)
        record = SimpleNamespace(leader="a", epoch=1, replicas=("a", "b", "c"))
        roles = SimpleNamespace(replicas={("/", "s"): b}, stale=set(), record=lambda vhost, name: record)
        failover = stream_failover.StreamFailover(node, roles)
        failover._check()  # b is not stopped: nothing
        b.stop(1)
        failover._check()  # stopped, not overdue: the election may still come
        await asyncio.sleep(0.25)
        assert proposed == []
        failover._check()
        await until(lambda: proposed, "a proposal")
        failover.stop()
        [elect] = proposed
        assert (type(elect).__name__, elect.vhost, elect.name, elect.epoch, elect.leader) == \
            ("StreamElect", "/", "s", 1, "a")  # fmt: skip

    asyncio.run(main())
