"""node/cluster/ (Cluster and its parts) in one process: the key-value machine, node identity,
propose/fence semantics, NoQuorum, and join/forget (several Clusters on one
loop, over real gRPC on loopback)."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
import uvloop

from node import config
from node.cluster.cluster import (
    Cluster,
    ClusterError,
    ClusterUnavailable,
    MembershipError,
    Noop,
    NoQuorum,
    OutcomeUnknown,
)
from node.cluster.kv import KeyValueMachine, Put
from raft import records
from raft.status import ProposalOutcome
from raft.transport import TransportOptions

SECRET = "inproc-secret"
OPTIONS = TransportOptions(backoff_initial=0.02, backoff_max=0.3)


def test_key_value_machine_versions_idempotency_and_snapshots():
    kv = KeyValueMachine()
    blank = kv.snapshot()
    assert kv.apply(Put("a", "1"), 2) == 1
    assert kv.apply(Put("a", "2", "op"), 3) == 2
    assert kv.apply(Put("a", "3", "op"), 4) == 2  # the same idempotency key applies once
    assert kv.apply(Put("b", "x"), 5) == 1
    assert kv.apply(Noop(), 6) is None
    copy = KeyValueMachine()
    copy.restore(kv.snapshot())
    assert copy.data == {"a": ("2", 2), "b": ("x", 1)}
    assert copy.apply(Put("a", "again", "op"), 7) == 2  # remembered across the snapshot
    copy.restore(blank)
    assert copy.data == {}
    # the records travel as explicit, versioned tuples
    for record in (Put("k", "v", "id"), Noop()):
        assert records.decode(records.encode(record)) == record
    assert records.kind_of(Put) == ("cluster.put", 1) and records.kind_of(Noop) == ("cluster.noop", 1)


def test_cluster_settings_from_the_environment():
    cfg = config.load(env={"WARREN_SEEDS": "a:1, b:2", "WARREN_CLUSTER_SECRET": "s", "WARREN_ENABLE_TEST_FAULTS": "1"})
    assert cfg.seeds == ["a:1", "b:2"] and cfg.cluster_secret == "s" and cfg.enable_test_faults is True
    cfg.grpc_port = 0
    with pytest.raises(ValueError, match="needs --cluster-secret"):
        Cluster.from_config(config.Config(seeds=["a:1"]), KeyValueMachine())
    with pytest.raises(ValueError, match="all of"):
        Cluster.from_config(config.Config(cluster_tls_cert="c"), KeyValueMachine())


def _node(tmp_path, name: str, port: int = 0, seeds=(), **kw) -> Cluster:
    return Cluster(data_dir=str(tmp_path / name), machine=KeyValueMachine(), port=port, seeds=list(seeds),
                   secret=SECRET, transport_options=OPTIONS, **kw)  # fmt: skip


async def until(predicate, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} never became true")
        await asyncio.sleep(0.01)


def test_a_single_node_commits_alone_and_keeps_its_id_and_data(tmp_path):
    async def main():
        node = _node(tmp_path, "a")
        await node.start()
        first_id = node.node_id
        await until(node.is_leader, what="leader")
        assert await node.propose(Put("k", "v")) == 1
        await node.fence()
        assert node.status()["members"] == [{"node": first_id, "self": True, "reachable": True, "leader": True}]
        await node.stop()
        # port 0 picks a port once; the node comes back under the same id
        again = _node(tmp_path, "a")
        await again.start()
        try:
            assert again.node_id == first_id
            await until(again.is_leader, what="leader")
            await again.fence()
            assert again.machine.get("k") == ("v", 1)
        finally:
            await again.stop()
        # a different id for the same data is refused
        port = int(first_id.rsplit(":", 1)[1])
        with pytest.raises(ClusterError, match="must not change"):
            await _node(tmp_path, "a", port=port + 1 if port < 65535 else port - 1).start()
        with pytest.raises(ClusterError, match="not running"):
            await again.propose(Put("k", "late"))

    uvloop.run(main())


def test_a_proposal_cancelled_as_its_answer_arrives_is_cancelled(tmp_path):
    """A task cancelled in the loop turn its proposal's answer came in stays
    cancelled. asyncio.wait_for (Python 3.11) returned the answer then and
    dropped the cancellation, so a task that proposes in a loop (the member
    announcer) ran on, and the node's stop, awaiting it, never ended."""

    async def main():
        node = _node(tmp_path, "a")
        await node.start()
        try:
            loop = asyncio.get_running_loop()
            answers = []
            task = loop.create_task(node.proposer.submit(answers.append, loop.time() + 10, 10))
            await asyncio.sleep(0)  # the task now waits for the answer
            answers[0]("result", ProposalOutcome.SUCCESS)
            task.cancel()  # in the same loop turn
            with pytest.raises(asyncio.CancelledError):
                await task
        finally:
            await node.stop()

    uvloop.run(main())


@contextlib.asynccontextmanager
async def three_nodes(tmp_path, seeded: bool = True):
    from node.cluster.identity import free_port

    ports = [free_port("127.0.0.1") for _ in range(3)]
    ids = [f"127.0.0.1:{p}" for p in ports]
    nodes = [_node(tmp_path, f"n{i}", ports[i], ids if seeded else ()) for i in range(3)]
    for n in nodes:
        await n.start()
    try:
        yield nodes
    finally:
        for n in nodes:
            await n.stop()


def _leader(nodes):
    leaders = [n for n in nodes if n.is_leader()]
    return leaders[0] if len(leaders) == 1 else None


@pytest.mark.slow
def test_proposals_from_followers_are_read_your_writes_and_a_cut_node_reports_no_quorum(tmp_path):
    async def main():
        async with three_nodes(tmp_path) as nodes:
            await until(lambda: _leader(nodes), what="a leader")
            leader = _leader(nodes)
            followers = [n for n in nodes if n is not leader]
            for i, n in enumerate(nodes * 5):
                assert await n.propose(Put(f"k{i}", "v")) == 1
                assert n.machine.get(f"k{i}") == ("v", 1)  # applied here when propose returns
            results = await asyncio.gather(*(nodes[i % 3].propose(Put("hot", str(i))) for i in range(90)))
            assert sorted(results) == list(range(1, 91))
            # a follower cut off from both others
            cut = followers[0]
            cut.partition()
            for n in nodes:
                if n is not cut:
                    n.partition([cut.node_id])
            started = time.monotonic()
            with pytest.raises(NoQuorum, match=r"^cluster has no majority: 1 of 3 members reachable$"):
                await cut.propose(Put("lost", "x"), timeout=0.5)
            assert time.monotonic() - started >= 0.4  # it waited for its timeout before giving up
            with pytest.raises(NoQuorum):
                await cut.fence(timeout=0.3)
            assert await leader.propose(Put("during", "y"), timeout=5) == 1
            for n in nodes:
                n.heal()
            await until(lambda: cut.machine.get("during") == ("y", 1), what="the cut node converged")
            assert cut.machine.get("lost") is None
            # With pre-vote (raft/prevote.py) the cut node asked for votes without raising its
            # term, was refused, and comes back to the leader it left.
            await until(lambda: cut.status()["leader"] == leader.node_id, what="the cut node follows the leader")
            st = cut.status()
            assert st["leader"] == leader.node_id and st["majority"] and st["partitioned"] == []
            assert _leader(nodes) is leader and st["term"] == leader.status()["term"]

    uvloop.run(main())


@pytest.mark.slow
def test_join_resets_the_joiner_and_forget_removes_a_member(tmp_path):
    async def main():
        async with three_nodes(tmp_path, seeded=False) as nodes:
            a, b, c = nodes
            await until(lambda: all(n.is_leader() for n in nodes), what="three clusters of one")
            await a.propose(Put("a", "1"))
            await b.propose(Put("b", "1"))
            with pytest.raises(MembershipError, match="another node"):
                await b.join_cluster(b.node_id)
            # the seed refuses the add: b is a cluster of one again
            real_call = b.membership._call
            trouble: list[Exception] = [MembershipError("refused", status=403), ClusterUnavailable("no answer")]

            async def troubled_call(peer, method, args, deadline):
                if method == "add" and trouble:
                    raise trouble.pop(0)
                return await real_call(peer, method, args, deadline)

            b.membership._call = troubled_call
            with pytest.raises(MembershipError, match="refused"):
                await b.join_cluster(a.node_id)
            assert b.members() == [b.node_id] and not b.status()["joining"]
            # no answer: the add may have happened, so b stays joining; joining again finishes
            with pytest.raises(ClusterUnavailable):
                await b.join_cluster(a.node_id)
            assert b.status()["joining"] and a.node_id in b.members()
            with pytest.raises(MembershipError, match="unfinished"):
                await b.join_cluster(c.node_id)
            await b.join_cluster(a.node_id)
            assert not b.status()["joining"]
            assert b.machine.data == {"a": ("1", 1)}  # b's own data was reset
            await c.join_cluster(b.node_id)  # through a follower
            assert c.members() == a.members() == b.members() == sorted(n.node_id for n in nodes)
            assert (await c.join_cluster(a.node_id))["members"]  # already together: nothing to do
            assert await c.propose(Put("c", "1")) == 1
            with pytest.raises(MembershipError, match="cannot forget itself"):
                await a.forget_cluster_node(a.node_id)
            with pytest.raises(MembershipError, match="not a member"):
                await a.forget_cluster_node("127.0.0.1:1")
            leader = _leader(nodes)
            with pytest.raises(MembershipError, match="is the leader"):
                await next(n for n in nodes if n is not leader).forget_cluster_node(leader.node_id)
            gone = next(n for n in nodes if n is not leader)
            await gone.stop()
            await leader.forget_cluster_node(gone.node_id)
            rest = [n for n in nodes if n is not gone]
            await until(lambda: all(len(n.members()) == 2 for n in rest), what="two members everywhere")
            assert await rest[1].propose(Put("after", "1")) == 1

    uvloop.run(main())


def test_the_http_endpoints_of_a_single_node(tmp_path):
    import base64

    import aiohttp

    from node.broker import Broker
    from node.config import Config

    async def main():
        statuses = {}
        for faults in (False, True):
            cfg = Config(data_dir=str(tmp_path / str(faults)), listen_host="127.0.0.1", amqp_port=0, http_port=0,
                         metrics_port=-1, grpc_port=0, enable_test_faults=faults)  # fmt: skip
            broker = Broker(cfg)
            await broker.start()
            base = f"http://127.0.0.1:{broker.http_port}/api/cluster"
            try:
                auth = {"Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()}
                async with aiohttp.ClientSession(headers=auth) as http:
                    await until(broker.cluster.is_leader, what="a leader")
                    async with http.get(base) as r:
                        assert r.status == 200
                        status = await r.json()
                    assert status["role"] == "leader" and status["node_name"] == cfg.node_name
                    assert [m["node"] for m in status["members"]] == [broker.cluster.node_id]
                    async with http.post(base + "/forget", json={"node": broker.cluster.node_id}) as r:
                        assert r.status == 400 and "cannot forget itself" in (await r.json())["reason"]
                    async with http.post(base + "/join", json={}) as r:
                        assert r.status == 400
                    async with http.put(base + "/test/kv/k", json={"value": "v"}) as r:
                        statuses[faults] = r.status
                        if faults:
                            assert await r.json() == {"key": "k", "version": 1, "node": broker.cluster.node_id}
                    if faults:
                        async with http.get(base + "/test/kv/k?consistent=true") as r:
                            assert await r.json() == {"key": "k", "value": "v", "version": 1}
                        async with http.get(base + "/test/kv/nope") as r:
                            assert r.status == 404
            finally:
                await broker.stop()
        assert statuses == {False: 404, True: 200}  # test endpoints need --enable-test-faults

    uvloop.run(main())


def test_cluster_machine_routes_by_kind_and_snapshots_both():
    from metadata.commands import EnableFeatureFlag
    from metadata.feature_flags import local_member
    from node.cluster.machine import ClusterMachine

    m = ClusterMachine(kv=KeyValueMachine())
    blank = m.snapshot()
    assert m.apply(Put("a", "1"), 1) == 1
    assert m.apply(local_member("n1", "0.1.0"), 2).ok
    assert m.apply(EnableFeatureFlag("k", "credit_api_v2"), 3).ok
    assert m.apply(Noop(), 4) is None
    copy = ClusterMachine(kv=KeyValueMachine())
    copy.restore(m.snapshot())
    assert copy.kv.data == {"a": ("1", 1)}
    assert copy.metadata.state.feature_flags == ("credit_api_v2",) and list(copy.metadata.state.members) == ["n1"]
    copy.restore(blank)
    assert copy.kv.data == {} and copy.metadata.state.feature_flags == ()


def test_without_the_probe_the_machine_ignores_cluster_records_and_snapshots_alike():
    from metadata.feature_flags import local_member
    from node.cluster.machine import ClusterMachine

    production, probed = ClusterMachine(), ClusterMachine(kv=KeyValueMachine())
    assert production.kv is None
    member = local_member("n1", "0.1.0")
    for m in (production, probed):
        assert m.apply(member, 1).ok
    # same bytes as a node whose probe holds nothing: any node (and version) reads either
    assert production.snapshot() == probed.snapshot()
    assert production.apply(Put("a", "1"), 2) is None
    assert probed.apply(Put("a", "1"), 2) == 1
    copy = ClusterMachine()
    copy.restore(probed.snapshot())  # the probe's data is dropped, the metadata kept
    assert copy.kv is None and list(copy.metadata.state.members) == ["n1"]


def test_the_test_knob_takes_flags_away_only_with_test_faults():
    from metadata.feature_flags import FLAGS
    from node.cluster.machine import local_flags

    env = {"WARREN_TEST_UNSUPPORTED_FLAGS": "credit_api_v2, nope"}
    assert local_flags(False, env) is FLAGS
    assert "credit_api_v2" in FLAGS.supported()
    assert "credit_api_v2" not in local_flags(True, env).supported()
    assert "warren_metadata_raft_v1" in local_flags(True, env).supported()


def test_a_node_announces_itself_and_a_flag_it_lacks_is_refused(tmp_path):
    from metadata.commands import EnableFeatureFlag
    from node.cluster.machine import ClusterMachine, announce_member, local_flags

    async def main():
        machine = ClusterMachine(kv=KeyValueMachine())
        node = Cluster(data_dir=str(tmp_path / "a"), machine=machine, port=0, secret=SECRET,
                       transport_options=OPTIONS)  # fmt: skip
        await node.start()
        registry = local_flags(True, {"WARREN_TEST_UNSUPPORTED_FLAGS": "credit_api_v2"})
        task = asyncio.get_running_loop().create_task(announce_member(node, machine, registry, interval=0.02))
        try:
            await until(lambda: node.node_id in machine.metadata.state.members, what="the member record")
            record = machine.metadata.state.members[node.node_id]
            assert "credit_api_v2" not in record.supported_flags
            refused = await node.propose(EnableFeatureFlag("k1", "credit_api_v2"))
            assert not refused.ok and node.node_id in refused.description
            assert (await node.propose(EnableFeatureFlag("k2", "warren_metadata_raft_v1"))).ok
            assert machine.metadata.state.feature_flags == ("warren_metadata_raft_v1",)
            assert (await node.propose(Put("k", "v"))) == 1  # the key-value probe still answers
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await node.stop()

    uvloop.run(main())


@pytest.mark.slow
def test_groups_that_heartbeat_rarely_keep_their_leaders_while_the_nodes_are_heard(tmp_path):
    """Ten groups whose heartbeat (2.5 s) is longer than their election timeout (1-2 s): the
    nodes' one liveness message per peer (node/cluster/liveness.py) is all that keeps their
    followers from electing. Cut a node off and its groups elect among the two others."""
    timing = {"raftMinTimeout": 1.0, "raftMaxTimeout": 2.0, "leaderFallbackTimeout": 3.0, "connectionTimeout": 2.0,
              "heartbeat_period": 2.5}  # fmt: skip
    names = [f"g{i}" for i in range(10)]

    async def main():
        async with three_nodes(tmp_path) as nodes:
            ids = [n.node_id for n in nodes]
            for n in nodes:
                for name in names:
                    n.open_group(name, ids, KeyValueMachine(), **timing)

            def leaders() -> dict[str, str] | None:
                seen = {}
                for name in names:
                    views = {n.groups[name].leader_id for n in nodes}
                    if len(views) != 1 or None in views:
                        return None
                    seen[name] = views.pop()
                return seen

            await until(lambda: leaders() is not None, 15, "a leader in every group")
            before = leaders()
            terms = {name: nodes[0].groups[name].term for name in names}
            await asyncio.sleep(5)  # two heartbeat periods, three to five election timeouts
            assert leaders() == before
            assert {name: nodes[0].groups[name].term for name in names} == terms

            cut = next(n for n in nodes if n.node_id in before.values())
            led = [name for name in names if before[name] == cut.node_id]
            rest = [n for n in nodes if n is not cut]
            cut.partition()
            for n in rest:
                n.partition([cut.node_id])

            def moved() -> bool:
                return all(len({n.groups[g].leader_id for n in rest}) == 1
                           and rest[0].groups[g].leader_id not in (None, cut.node_id) for g in led)  # fmt: skip

            await until(moved, 15, "the cut node's groups led by another")
            for n in nodes:
                n.heal()

    uvloop.run(main())


@pytest.mark.slow
def test_a_leader_cut_off_with_a_command_in_its_log_answers_outcome_unknown(tmp_path):
    """Only a proposal that can not have reached a leader's log is answered NoQuorum (a
    promise that it was not applied): one appended by a leader cut off right after may
    still be committed by the next leader, so its answer is OutcomeUnknown."""

    async def main():
        async with three_nodes(tmp_path) as nodes:
            await until(lambda: _leader(nodes), what="a leader")
            leader = _leader(nodes)
            leader.partition()
            for n in nodes:
                if n is not leader:
                    n.partition([leader.node_id])
            with pytest.raises(OutcomeUnknown, match="may still be applied"):
                await leader.propose(Put("maybe", "x"), timeout=0.5)
            for n in nodes:
                n.heal()

    uvloop.run(main())


def test_a_one_member_group_commits_once_its_write_lands(tmp_path):
    """No follower answers a one-member group, and its heartbeat (here 20 s) is far off: the
    landing of the write that holds its entries is what ticks it to commit (node/cluster/hosting.py)."""

    async def main():
        node = _node(tmp_path, "solo")
        await node.start()
        try:
            node.open_group("g", [node.node_id], KeyValueMachine(), raftMinTimeout=1.0, raftMaxTimeout=2.0,
                            leaderFallbackTimeout=30.0, connectionTimeout=2.0, heartbeat_period=20.0)  # fmt: skip
            await until(lambda: node.groups["g"].is_leader, what="the group leads itself")
            loop = asyncio.get_running_loop()
            for i in range(5):
                done = loop.create_future()
                node.submit("g", Put(f"k{i}", "v"), lambda result, error, done=done: done.set_result(error))
                assert await asyncio.wait_for(done, 10) is ProposalOutcome.SUCCESS
        finally:
            await node.stop()

    uvloop.run(main())


class TurnRecorder:
    """A group's machine that notes, for each record, the loop turn it was applied in."""

    def __init__(self, expected: int = 0) -> None:
        self.turn = 0
        self.expected = expected
        self.applied: list[tuple[str, int]] = []  # (value, loop turn)

    def count_turns(self) -> None:
        """Counts loop turns (a callback that schedules itself) until `expected` records are in."""
        self.turn += 1
        if len(self.applied) < self.expected:
            asyncio.get_running_loop().call_soon(self.count_turns)

    def apply(self, record, index):
        self.applied.append((record.value, self.turn))

    def snapshot(self) -> bytes:
        return b""

    def restore(self, data: bytes) -> None:
        pass


def test_a_restarted_node_applies_a_long_log_over_many_loop_turns(tmp_path):
    """Raft patch 10: a tick applies a bounded step, and the node ticks the group
    again the next loop turn, so the loop runs other work in between."""
    no_snapshot = {"logCompactionMinEntries": 10**6}
    values = [f"v{i}" for i in range(300)]

    async def main():
        node = _node(tmp_path, "a")
        await node.start()
        await until(node.is_leader, what="leader")
        group = node.open_group("g", [node.node_id], TurnRecorder(), **no_snapshot)
        await until(lambda: group.is_leader, what="group leader")
        done: list = []
        for v in values:
            node.submit("g", Put("k", v), lambda _res, outcome: done.append(outcome))
        await until(lambda: len(done) == len(values), what="all committed")
        assert set(done) == {ProposalOutcome.SUCCESS}
        await node.stop()

        again = _node(tmp_path, "a")
        await again.start()
        try:
            rec = TurnRecorder(len(values))
            rec.count_turns()
            again.open_group("g", [again.node_id], rec, apply_bytes=200, **no_snapshot)
            await until(lambda: len(rec.applied) == len(values), what="the log applied again")
            assert [v for v, _ in rec.applied] == values
            turns = sorted({t for _, t in rec.applied})
            per_turn = [sum(1 for _, t in rec.applied if t == turn) for turn in turns]
            assert len(per_turn) >= 20 and max(per_turn) <= 20, per_turn  # ~7 records of ~28 B per 200 B step
            # each step in the turn after the one before: the node ticks the group again at once
            assert max(b - a for a, b in zip(turns, turns[1:], strict=False)) <= 3, turns
        finally:
            await again.stop()

    uvloop.run(main())
