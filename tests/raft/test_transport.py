"""NodeTransport and GroupTransport over real gRPC on 127.0.0.1, several nodes in one process.

Covers: authenticated peers exchanging several groups' messages, refusal of
a wrong secret and of unauthenticated or stale streams, order and no
duplicates across forced reconnects (epochs), the partition switch, one
gRPC message per peer per loop turn, the durability gate, the liveness
watchdog (with an injected clock) and mutual TLS.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import shutil
import subprocess

import grpc
import pytest
import uvloop

from raft.grpc_auth import MD_LAST_EPOCH, stream_metadata
from raft.proto import cluster_pb2, cluster_pb2_grpc
from raft.transport import GroupTransport, NodeTransport, TlsConfig, TransportOptions

SECRET = "test-cluster-secret"
Frame = cluster_pb2.Frame
Envelope = cluster_pb2.Envelope
QUIET = TransportOptions(ping_interval=30.0, dead_after=90.0)  # no pings mid-test
FAST = TransportOptions(backoff_initial=0.01, backoff_max=0.2)


async def until(predicate, timeout: float = 5.0, what: str = "condition") -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"{what} never became true")
        await asyncio.sleep(0.002)


@contextlib.asynccontextmanager
async def nodes(n: int, *, secrets=None, options: TransportOptions = FAST, connect: bool = True, **kw):
    ts = [
        NodeTransport(listen="127.0.0.1:0", secret=(secrets or [SECRET] * n)[i], options=options, **kw)
        for i in range(n)
    ]
    try:
        for t in ts:
            await t.start()
        if connect:
            for t in ts:
                for u in ts:
                    if u is not t:
                        t.add_peer(u.node_id)
            await until(lambda: all(t.is_connected(u.node_id) for t in ts for u in ts if u is not t), what="all up")
        yield ts
    finally:
        for t in ts:
            await t.close()


def collect(t: NodeTransport) -> list:
    got = []
    t.on_node_message = lambda peer, channel, payload: got.append((peer, channel, payload, t.epoch_from(peer)))
    return got


class Recorder:
    """Stands in for pysyncobj: the callbacks of one GroupTransport."""

    def __init__(self, gt: GroupTransport) -> None:
        self.gt = gt
        self.messages: list = []
        self.events: list = []
        gt.setOnMessageReceivedCallback(lambda node, m: self.messages.append((node.id, m)))
        gt.setOnNodeDisconnectedCallback(lambda node: self.events.append(("down", node.id)))
        gt.setOnNodeConnectedCallback(lambda node: self.events.append(("up", node.id)))


def group(t: NodeTransport, name: str, peers) -> Recorder:
    return Recorder(GroupTransport(t, name, t.node_id, [p.node_id for p in peers]))


def vote(term: int) -> dict:
    return {"type": "request_vote", "term": term, "last_log_index": 1, "last_log_term": 0}


# -- authenticated peers, several groups ------------------------------------------


def test_peers_exchange_messages_for_several_groups():
    async def main():
        async with nodes(3) as ts:
            recs = {(i, g): group(t, g, [u for u in ts if u is not t]) for i, t in enumerate(ts) for g in "abc"}
            # pysyncobj hears about peers that were up before it set its callback
            for (i, _), r in recs.items():
                assert sorted(r.events) == sorted(("up", u.node_id) for u in ts if u is not ts[i])
            for (i, g), r in recs.items():
                for u in ts:
                    if u is not ts[i]:
                        node = r.gt._members[u.node_id]
                        assert r.gt.send(node, vote(ord(g) * 10 + i))
            await until(lambda: all(len(r.messages) == 2 for r in recs.values()), what="all delivered")
            for (_, g), r in recs.items():
                senders = {u.node_id: j for j, u in enumerate(ts)}
                for sender, m in r.messages:
                    assert m == vote(ord(g) * 10 + senders[sender])

    uvloop.run(main())


def test_plain_asyncio_loop_works_too():
    async def main():
        async with nodes(2) as (a, b):
            got = collect(b)
            assert a.send_node_message(b.node_id, "ch", b"hello")
            await until(lambda: got)
            assert got[0][:3] == (a.node_id, "ch", b"hello")

    asyncio.run(main())


def test_group_messages_go_only_to_that_groups_members():
    async def main():
        async with nodes(3) as (a, b, c):
            ra = group(a, "g", [b, c])
            rb = group(b, "g", [a])  # b's group g does not include c
            group(c, "g", [a])
            group(a, "only-on-a", [b])
            assert ra.gt.send(ra.gt._members[b.node_id], vote(1))
            ga2 = a.groups["only-on-a"]
            assert ga2.send(ga2._members[b.node_id], vote(2))
            await until(lambda: rb.messages and b.stats.dropped_unknown_group == 1)
            cgt = c.groups["g"]
            assert not cgt.send(ra.gt._members[b.node_id], vote(3))  # b is not a member of c's g
            assert rb.messages == [(a.node_id, vote(1))]

    uvloop.run(main())


def test_an_undecodable_payload_is_rejected_and_the_stream_goes_on():
    async def main():
        async with nodes(2) as (a, b):
            group(a, "g", [b])
            rb = group(b, "g", [a])
            link = a._links[b.node_id]
            assert a._enqueue(link, Envelope.RAFT, "g", pickle_of_a_vote())
            assert a._enqueue(link, Envelope.RAFT, "g", b"\x03\x00")
            ga = a.groups["g"]
            assert ga.send(ga._members[b.node_id], vote(5))
            await until(lambda: rb.messages)
            assert rb.messages == [(a.node_id, vote(5))]
            assert b.stats.rejected_messages == 2

    uvloop.run(main())


def pickle_of_a_vote() -> bytes:
    import pickle

    return pickle.dumps(vote(1))


def test_membership_changes_keep_one_link_per_peer():
    async def main():
        async with nodes(2, connect=False) as (a, b):
            g1 = GroupTransport(a, "g1", a.node_id, [b.node_id])
            g2 = GroupTransport(a, "g2", a.node_id, [])
            g2.addNode(b.node_id)
            await until(lambda: a.is_connected(b.node_id))
            assert g1.isConnected(b.node_id) and g2.isConnected(b.node_id)
            link = a._links[b.node_id]
            g1.dropNode(b.node_id)
            assert a._links[b.node_id] is link and a.is_connected(b.node_id)
            g2.destroy()
            assert b.node_id not in a._links and "g2" not in a.groups
            await until(lambda: b.epoch_from(a.node_id) is None, what="b sees a's stream end")
            with pytest.raises(ValueError):
                GroupTransport(a, "g1", a.node_id, [])  # one transport per group
            with pytest.raises(ValueError):
                GroupTransport(a, "g3", b.node_id, [])  # self node must be this node

    uvloop.run(main())


# -- authentication -----------------------------------------------------------------


def test_a_wrong_secret_is_refused_both_ways():
    async def main():
        async with nodes(3, secrets=[SECRET, SECRET, "wrong"], connect=False) as (a, b, c):
            got_a, got_c = collect(a), collect(c)
            for t in (a, b, c):
                for u in (a, b, c):
                    if u is not t:
                        t.add_peer(u.node_id)
            await until(lambda: a.is_connected(b.node_id) and b.is_connected(a.node_id))
            await until(lambda: a.stats.auth_failures >= 2 and c.stats.auth_failures >= 2, what="refusals")
            assert not c.is_connected(a.node_id) and not a.is_connected(c.node_id)
            assert not c.send_node_message(a.node_id, "x", b"intruder")
            assert not a.send_node_message(c.node_id, "x", b"secret stuff")
            assert a.epoch_from(c.node_id) is None and c.epoch_from(a.node_id) is None
            await asyncio.sleep(0.1)
            assert got_a == [] and got_c == []

    uvloop.run(main())


def test_streams_without_valid_credentials_are_refused():
    async def main():
        async with nodes(1, connect=False) as (b,):
            got = collect(b)
            async with grpc.aio.insecure_channel(b.node_id) as channel:
                stub = cluster_pb2_grpc.ClusterStub(channel)
                good = dict(stream_metadata(SECRET, "10.1.1.1:25672", b.node_id, 5))
                cases = [
                    (),
                    tuple(stream_metadata("other", "10.1.1.1:25672", b.node_id, 5)),
                    tuple(stream_metadata(SECRET, "10.1.1.1:25672", "10.2.2.2:25672", 5)),  # token for another node
                    tuple({**good, "x-warren-node": "10.1.1.2:25672"}.items()),  # token of another sender
                    tuple({**good, "x-warren-epoch": "6"}.items()),  # token of another epoch
                    tuple({**good, "x-warren-codec": "99"}.items()),
                ]
                for md in cases:
                    call = stub.Stream(metadata=md)
                    with pytest.raises(grpc.aio.AioRpcError) as e:
                        await call.read()
                    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
                assert b.stats.auth_failures == len(cases)
            assert got == []

    uvloop.run(main())


# -- epochs, order, no duplicates --------------------------------------------------------


def test_order_and_no_duplicates_across_forced_reconnects():
    async def main():
        async with nodes(2) as (a, b):
            got = collect(b)
            accepted = []
            seq = 0
            epochs = [a.epoch_to(b.node_id)]
            for _ in range(6):
                for _turn in range(20):
                    for _ in range(50):
                        if a.send_node_message(b.node_id, "seq", b"%d" % seq):
                            accepted.append(seq)
                        seq += 1
                    await asyncio.sleep(0)
                a.reset_peer(b.node_id)  # this turn's messages die with their session
                assert not a.send_node_message(b.node_id, "seq", b"%d" % seq)
                seq += 1
                await until(lambda: a.is_connected(b.node_id))
                epochs.append(a.epoch_to(b.node_id))
            a.send_node_message(b.node_id, "seq", b"last")
            await until(lambda: got and got[-1][2] == b"last")
            assert epochs == sorted(set(epochs)), "every session has a higher epoch"
            received = [int(p) for _, _, p, _ in got[:-1]]
            assert received == sorted(set(received)), "in order, no duplicates"
            assert set(received) <= set(accepted)
            # messages of a session never arrive once a later session delivered
            seen = [e for _, _, _, e in got]
            assert seen == sorted(seen) and set(seen) <= set(epochs)
            assert len(set(seen)) >= 5
            assert b.stats.stale_streams == 0

    uvloop.run(main())


def test_messages_accepted_in_a_dead_session_are_never_sent():
    async def main():
        async with nodes(2) as (a, b):
            got = collect(b)
            assert a.send_node_message(b.node_id, "x", b"doomed")
            a.reset_peer(b.node_id)  # same loop turn: not yet flushed
            await until(lambda: a.is_connected(b.node_id))
            assert a.send_node_message(b.node_id, "x", b"fresh")
            await until(lambda: got)
            await asyncio.sleep(0.05)
            assert [p for _, _, p, _ in got] == [b"fresh"]
            assert a.stats.dropped_on_reconnect == 1

    uvloop.run(main())


def test_stale_and_superseded_streams_deliver_nothing():
    async def main():
        async with nodes(1, connect=False) as (b,):
            got = collect(b)
            sender = "10.9.9.9:25672"
            async with grpc.aio.insecure_channel(b.node_id) as channel:
                stub = cluster_pb2_grpc.ClusterStub(channel)

                async def open_stream(epoch):
                    call = stub.Stream(metadata=stream_metadata(SECRET, sender, b.node_id, epoch))
                    accept = await call.read()
                    assert accept.epoch == epoch
                    return call

                def frame(epoch, payload):
                    return Frame(epoch=epoch, messages=[Envelope(kind=Envelope.NODE, group="c", payload=payload)])

                old = await open_stream(100)
                await old.write(frame(100, b"one"))
                await until(lambda: len(got) == 1)
                new = await open_stream(101)
                assert b.epoch_from(sender) == 101
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await old.read()
                assert e.value.code() == grpc.StatusCode.UNAVAILABLE and "superseded" in e.value.details()
                with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
                    await old.write(frame(100, b"from the old stream"))
                await new.write(frame(101, b"two"))
                await until(lambda: len(got) == 2)
                await asyncio.sleep(0.05)
                assert [(p, e) for _, _, p, e in got] == [(b"one", 100), (b"two", 101)]

                stale = stub.Stream(metadata=stream_metadata(SECRET, sender, b.node_id, 99))
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await stale.read()
                assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
                assert (MD_LAST_EPOCH, "101") in tuple(e.value.trailing_metadata())
                assert b.stats.stale_streams == 1

                await new.write(frame(7, b"wrong epoch in frame"))
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await new.read()
                assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert len(got) == 2

    uvloop.run(main())


def test_a_sender_whose_clock_went_back_jumps_past_the_last_epoch():
    async def main():
        async with nodes(2, connect=False) as (a, b):
            a._epoch_clock = lambda: 1  # a restarted with a clock far in the past...
            b.inbound.last_epoch[a.node_id] = 10**18  # ...after an earlier run b remembers
            a.add_peer(b.node_id)
            await until(lambda: a.is_connected(b.node_id))
            assert a.epoch_to(b.node_id) > 10**18
            assert b.stats.stale_streams == 1

    uvloop.run(main())


# -- partition switch ----------------------------------------------------------------------


def test_partition_drops_traffic_both_ways_until_heal():
    async def main():
        async with nodes(3) as (a, b, c):
            ra, rb, rc = group(a, "g", [b, c]), group(b, "g", [a, c]), group(c, "g", [a, b])
            got_b = collect(b)
            epoch_ab = a.epoch_to(b.node_id)
            a.partition([b.node_id])
            assert a.partitioned == {b.node_id}
            assert ("down", b.node_id) in ra.events  # reported at once
            assert not a.send_node_message(b.node_id, "x", b"lost")
            assert not ra.gt.send(ra.gt._members[b.node_id], vote(1))
            await until(lambda: ("down", a.node_id) in rb.events, what="b sees a go")
            await asyncio.sleep(0.2)
            assert not a.is_connected(b.node_id) and not b.is_connected(a.node_id)
            assert b.stats.connect_failures >= 1  # b keeps trying; a refuses
            assert not b.send_node_message(a.node_id, "x", b"lost too")
            # the rest of the cluster is unaffected
            assert a.is_connected(c.node_id) and c.is_connected(b.node_id)
            assert ra.gt.send(ra.gt._members[c.node_id], vote(2))
            await until(lambda: rc.messages)
            a.heal()
            assert a.partitioned == frozenset()
            await until(lambda: a.is_connected(b.node_id) and b.is_connected(a.node_id), what="healed")
            assert a.epoch_to(b.node_id) > epoch_ab
            assert ra.events[-1] == ("up", b.node_id) and rb.events[-1] == ("up", a.node_id)
            assert a.send_node_message(b.node_id, "x", b"after heal")
            await until(lambda: got_b)
            assert [p for _, _, p, _ in got_b] == [b"after heal"]

    uvloop.run(main())


# -- batching --------------------------------------------------------------------------------


def test_one_loop_turn_is_one_grpc_message_per_peer():
    async def main():
        async with nodes(3, options=QUIET) as (a, b, c):
            got_b, got_c = collect(b), collect(c)
            ga = GroupTransport(a, "g", a.node_id, [b.node_id])
            rb = group(b, "g", [a])
            sent_before = a.stats.frames_sent
            for i in range(1000):
                assert a.send_node_message(b.node_id, "x", b"%d" % i)
                assert a.send_node_message(c.node_id, "x", b"%d" % i)
                if i % 10 == 0:
                    assert ga.send(ga._members[b.node_id], vote(i))
            await until(lambda: len(got_b) == len(got_c) == 1000 and len(rb.messages) == 100)
            assert a.stats.frames_sent - sent_before == 2  # one per peer
            assert [int(p) for _, _, p, _ in got_b] == list(range(1000))

    uvloop.run(main())


def test_a_large_turn_is_split_into_frames_of_bounded_size():
    async def main():
        async with nodes(2, options=TransportOptions(ping_interval=30.0, dead_after=90.0, max_frame_bytes=10_000)) as (
            a,
            b,
        ):
            got = collect(b)
            before = a.stats.frames_sent
            for i in range(1000):
                a.send_node_message(b.node_id, "x", b"%04d" % i + b"." * 96)
            await until(lambda: len(got) == 1000)
            assert 10 <= a.stats.frames_sent - before <= 15
            assert [int(p[:4]) for _, _, p, _ in got] == list(range(1000))

    uvloop.run(main())


# -- the durability gate -----------------------------------------------------------------------


def test_before_flush_holds_messages_until_the_journal_is_durable():
    async def main():
        async with nodes(2, options=QUIET) as (a, b):
            got = collect(b)
            loop = asyncio.get_running_loop()
            synced = loop.create_future()
            calls = []

            def sync_point():
                calls.append(len(calls))
                return synced if len(calls) == 1 else None

            a.before_flush.append(sync_point)
            a.send_node_message(b.node_id, "x", b"vote")
            await asyncio.sleep(0.05)
            a.send_node_message(b.node_id, "x", b"later")  # its own turn is durable, but it queues behind
            await asyncio.sleep(0.05)
            assert calls == [0, 1] and got == []
            synced.set_result(None)
            await until(lambda: len(got) == 2)
            assert [p for _, _, p, _ in got] == [b"vote", b"later"]

    uvloop.run(main())


def test_a_failed_sync_stops_all_sending():
    async def main():
        errors = []
        async with nodes(2, options=QUIET, on_error=errors.append) as (a, b):
            got = collect(b)
            failed = asyncio.get_running_loop().create_future()
            a.before_flush.append(lambda: failed)
            a.send_node_message(b.node_id, "x", b"ack that must not go")
            await asyncio.sleep(0.02)
            failed.set_exception(OSError("fsync failed"))
            await until(lambda: errors)
            assert isinstance(a.failed, OSError)
            assert not a.send_node_message(b.node_id, "x", b"more")
            await asyncio.sleep(0.05)
            assert got == []

    uvloop.run(main())


# -- liveness ------------------------------------------------------------------------------------


def test_idle_streams_ping_and_silent_streams_are_dropped():
    async def main():
        now = [0.0]
        opts = TransportOptions(ping_interval=0.05, dead_after=0.2, backoff_initial=0.01, backoff_max=0.1)
        async with nodes(2, options=opts, clock=lambda: now[0]) as (a, b):
            got = collect(b)
            epoch = a.epoch_to(b.node_id)
            for _ in range(5):  # time passes, but pings keep both directions alive
                now[0] += 0.04
                await asyncio.sleep(0.1)
            assert a.stats.timeouts == b.stats.timeouts == 0
            assert a.stats.frames_sent >= 2 and a.epoch_to(b.node_id) == epoch
            now[0] += 10  # the clock jumps: everything looks silent
            # whichever watchdog runs first drops the stream (a's link, or b's end of it)
            await until(lambda: a.stats.timeouts + b.stats.timeouts >= 1)
            await until(lambda: a.is_connected(b.node_id) and a.epoch_to(b.node_id) != epoch)
            assert a.send_node_message(b.node_id, "x", b"still works")
            await until(lambda: got)

    uvloop.run(main())


# -- mutual TLS -------------------------------------------------------------------------------------


def _make_ca(d, name):
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", d / f"{name}.key", "-out", d / f"{name}.pem", "-days", "2", "-subj", f"/CN={name}"],
        check=True, capture_output=True,
    )  # fmt: skip


def _make_cert(d, ca, name):
    subprocess.run(
        ["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", d / f"{name}.key", "-out", d / f"{name}.csr", "-subj", f"/CN={name}"],
        check=True, capture_output=True,
    )  # fmt: skip
    ext = d / f"{name}.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    subprocess.run(
        ["openssl", "x509", "-req", "-in", d / f"{name}.csr", "-CA", d / f"{ca}.pem", "-CAkey", d / f"{ca}.key",
         "-CAcreateserial", "-out", d / f"{name}.pem", "-days", "2", "-extfile", ext],
        check=True, capture_output=True,
    )  # fmt: skip
    return TlsConfig(cert_file=d / f"{name}.pem", key_file=d / f"{name}.key", ca_file=d / f"{ca}.pem")


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_mutual_tls_admits_only_nodes_of_the_cluster_ca(tmp_path):
    _make_ca(tmp_path, "ca")
    _make_ca(tmp_path, "rogue-ca")
    tls_a = _make_cert(tmp_path, "ca", "a")
    tls_b = _make_cert(tmp_path, "ca", "b")
    tls_r = _make_cert(tmp_path, "rogue-ca", "r")

    async def main():
        ts = [
            NodeTransport(listen="127.0.0.1:0", secret=SECRET, tls=tls, options=FAST) for tls in (tls_a, tls_b, tls_r)
        ]
        a, b, r = ts
        try:
            for t in ts:
                await t.start()
            got = collect(b)
            a.add_peer(b.node_id)
            r.add_peer(b.node_id)  # right secret, wrong CA
            b.add_peer(r.node_id)
            await until(lambda: a.is_connected(b.node_id))
            assert a.send_node_message(b.node_id, "x", b"over tls")
            await until(lambda: got)
            await until(lambda: r.stats.connect_failures >= 2 and b.stats.connect_failures >= 2)
            assert not r.is_connected(b.node_id) and not b.is_connected(r.node_id)
            assert b.epoch_from(r.node_id) is None
            assert [p for _, _, p, _ in got] == [b"over tls"]
        finally:
            for t in ts:
                await t.close()

    uvloop.run(main())


# -- setup errors --------------------------------------------------------------------------------------


def test_start_fails_cleanly_on_a_busy_port_and_a_wildcard_needs_a_node_id():
    async def main():
        async with nodes(1, connect=False) as (a,):
            busy = NodeTransport(listen=f"127.0.0.1:{a.port}", secret=SECRET)
            with pytest.raises(OSError):
                await busy.start()
            await busy.close()
        with pytest.raises(ValueError):
            NodeTransport(listen="0.0.0.0:25672", secret=SECRET)
        with pytest.raises(ValueError):
            NodeTransport(listen="127.0.0.1:0", secret="")
        NodeTransport(listen="0.0.0.0:25672", secret=SECRET, node_id="node1.example:25672")

    uvloop.run(main())


# -- throughput (a measurement more than a test) -----------------------------------------------------


@pytest.mark.slow
def test_throughput_of_batched_messages():
    async def main():
        async with nodes(2, options=QUIET) as (a, b):
            loop = asyncio.get_running_loop()
            count = [0]
            b.on_node_message = lambda peer, channel, payload: count.__setitem__(0, count[0] + 1)
            n, per_turn = 200_000, 1000
            started = loop.time()
            for _ in range(n // per_turn):
                for _ in range(per_turn):
                    a.send_node_message(b.node_id, "bench", b"x" * 100)
                await asyncio.sleep(0)
            await until(lambda: count[0] == n, timeout=60)
            node_rate = n / (loop.time() - started)

            # pysyncobj-shaped AppendEntries (one 100-byte entry) for 100 groups; a backlog this
            # deep would have GroupTransport hold entries back (a lagging follower), so lift that
            a.options = dataclasses.replace(a.options, max_outbox_bytes=1 << 30)
            groups = [f"q{i}" for i in range(100)]
            senders = [GroupTransport(a, g, a.node_id, [b.node_id]) for g in groups]
            got = [0]
            for g in groups:
                GroupTransport(b, g, b.node_id, [a.node_id]).setOnMessageReceivedCallback(
                    lambda node, m: got.__setitem__(0, got[0] + 1)
                )
            peer = senders[0]._members[b.node_id]
            started = loop.time()
            for i in range(n // per_turn):
                for j in range(per_turn):
                    senders[j % 100].send(
                        peer,
                        {"type": "append_entries", "term": 3, "commit_index": i, "entries": [(b"e" * 100, i, 3)],
                         "prevLogIdx": i - 1 if i else None, "prevLogTerm": 3},
                    )  # fmt: skip
                await asyncio.sleep(0)
            await until(lambda: got[0] == n, timeout=60)
            raft_rate = n / (loop.time() - started)
            print(f"\nnode messages (100 B, {per_turn}/turn): {node_rate:,.0f}/s")
            print(f"raft append_entries via GroupTransport (100 groups): {raft_rate:,.0f}/s")
            assert a.stats.entries_held_back == 0  # rates are for bench/, not assertions

    uvloop.run(main())
