"""NodeTransport and GroupTransport over real gRPC on 127.0.0.1, several nodes in one process.

Covers: peers exchanging several groups' messages, order and no duplicates
across forced reconnects (epochs), the partition switch, one gRPC message per
peer per loop turn, the durability gate and the liveness watchdog (with an
injected clock). Authentication and TLS: test_transport_auth.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses

import grpc
import pytest
import uvloop
from transport_helpers import QUIET, SECRET, Envelope, Frame, collect, group, nodes, until, vote

from raft.grpc_auth import MD_LAST_EPOCH, stream_metadata
from raft.journal_format import NotDurable
from raft.proto import cluster_pb2_grpc
from raft.transport import GroupTransport, TransportOptions

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
            assert a.outbound.enqueue(link, Envelope.RAFT, "g", pickle_of_a_vote())
            assert a.outbound.enqueue(link, Envelope.RAFT, "g", b"\x03\x00")
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


def test_an_outbound_only_partition_keeps_the_peers_stream_to_us():
    async def main():
        async with nodes(2) as (a, b):
            got_a = collect(a)
            a.partition([b.node_id], inbound=False)
            assert not a.is_connected(b.node_id) and not a.send_node_message(b.node_id, "x", b"lost")
            assert a.epoch_from(b.node_id) is not None  # b's stream to a was not cut
            assert b.send_node_message(a.node_id, "x", b"still arrives")
            await until(lambda: got_a, what="b's message through its stream")
            a.heal()
            await until(lambda: a.is_connected(b.node_id), what="healed")
            assert [p for _, _, p, _ in got_a] == [b"still arrives"]

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
            # the writer counts a frame once its write returns, which can be after the peer read it
            await until(lambda: len(got_b) == len(got_c) == 1000 and len(rb.messages) == 100
                        and a.stats.frames_sent - sent_before >= 2)  # fmt: skip
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
            await until(lambda: len(got) == 1000 and a.stats.frames_sent - before >= 10)  # counted after the write
            assert a.stats.frames_sent - before <= 15
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


def test_the_turns_one_sync_releases_leave_in_one_frame_per_peer():
    """A node that seals several loop turns while one fsync is out sends them, once it
    lands, as one gRPC message per peer, each peer's messages in the order sent."""

    async def main():
        async with nodes(3, options=QUIET) as (a, b, c):
            got_b, got_c = collect(b), collect(c)
            synced = asyncio.get_running_loop().create_future()
            a.before_flush.append(lambda: None if synced.done() else synced)
            turns = 0
            for i in range(5):  # five loop turns, each sealed behind the same write
                a.send_node_message(b.node_id, "x", b"b%d" % i)
                a.send_node_message(c.node_id, "x", b"c%d" % i)
                flushes = a.stats.flushes
                await until(lambda flushes=flushes: a.stats.flushes > flushes)
                turns += 1
            assert turns == 5 and got_b == got_c == []
            sent_before = a.stats.frames_sent
            synced.set_result(None)
            await until(lambda: len(got_b) == len(got_c) == 5 and a.stats.frames_sent - sent_before >= 2)
            assert a.stats.frames_sent - sent_before == 2  # one per peer, not one per turn and peer
            assert [p for _, _, p, _ in got_b] == [b"b%d" % i for i in range(5)]
            assert [p for _, _, p, _ in got_c] == [b"c%d" % i for i in range(5)]

    uvloop.run(main())


def test_a_leaders_append_entries_skip_the_gate_answers_and_anything_behind_them_wait():
    """A leader's AppendEntries leave while this node's own write is still out (it counts
    itself toward a commit only once durable); a vote, or an ack, waits for the write; and
    once anything for a peer waits at the gate, later AppendEntries to it queue behind."""

    def entries(i: int) -> dict:
        return {"type": "append_entries", "term": 1, "commit_index": i, "prevLogIdx": i, "prevLogTerm": 1,
                "entries": [(b"cmd%d" % i, i + 1, 1)]}  # fmt: skip

    async def main():
        async with nodes(2, options=QUIET) as (a, b):
            synced = asyncio.get_running_loop().create_future()
            a.before_flush.append(lambda: None if synced.done() else synced)  # a write is always out
            ga = GroupTransport(a, "g", a.node_id, [b.node_id])
            rb = group(b, "g", [a])
            peer = ga._members[b.node_id]
            assert ga.send(peer, entries(1))
            await until(lambda: len(rb.messages) == 1)  # not held by the write
            assert ga.send(peer, vote(2))
            await asyncio.sleep(0)
            assert ga.send(peer, entries(2))  # a later turn, behind the held vote
            await asyncio.sleep(0.05)
            assert [m["type"] for _, m in rb.messages] == ["append_entries"]
            synced.set_result(None)
            await until(lambda: len(rb.messages) == 3)
            assert [(m["type"], m.get("commit_index")) for _, m in rb.messages] == [
                ("append_entries", 1), ("request_vote", None), ("append_entries", 2)]

    uvloop.run(main())


def test_a_write_that_met_a_full_disk_drops_its_turns_gated_messages_and_sends_the_ungated_behind_them():
    """The queue proxy's messages skip the gate but queue behind a gated one for the same peer;
    when that turn's write fails with NotDurable (the Raft log out of space), the gated ones are
    lost as on a network, and the proxy's still leave, in order: the proxy promises its peer
    no loss while a stream lives (a lost delivery or settle would hold a message for ever)."""

    async def main():
        async with nodes(2, options=QUIET) as (a, b):
            got = collect(b)
            full = asyncio.get_running_loop().create_future()
            a.before_flush.append(lambda: None if full.done() else full)
            a.send_node_message(b.node_id, "x", b"ack")  # gated: answers for the write
            a.send_node_message(b.node_id, "x", b"deliver 1", gated=False)  # behind it, same turn
            await asyncio.sleep(0)
            a.send_node_message(b.node_id, "x", b"deliver 2", gated=False)  # a later turn, still behind
            await asyncio.sleep(0.05)
            assert got == []
            full.set_exception(NotDurable("no space left on device"))
            await until(lambda: len(got) == 2)
            assert [p for _, _, p, _ in got] == [b"deliver 1", b"deliver 2"]
            assert a.stats.dropped_not_durable == 1
            assert a.send_node_message(b.node_id, "x", b"after")  # and the transport goes on
            await until(lambda: len(got) == 3)

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


# -- the delay fault (netem's delay and jitter, for the chaos suite's slow-link) -------------------


def test_a_delayed_transport_holds_each_frame_and_keeps_the_order():
    async def main():
        async with nodes(2) as (a, b):
            loop = asyncio.get_running_loop()
            arrived: dict[int, float] = {}
            b.on_node_message = lambda peer, channel, payload: arrived.setdefault(int(payload), loop.time())
            a.delay(1.0, 0.2)
            sent_at = {}
            for turn in range(20):
                for i in range(5):
                    sent_at[turn * 5 + i] = loop.time()
                    assert a.send_node_message(b.node_id, "seq", b"%d" % (turn * 5 + i))
                await asyncio.sleep(0.005)
            await until(lambda: len(arrived) == 100, what="every message delivered")
            assert list(arrived) == list(range(100))  # in order
            assert min(arrived[s] - sent_at[s] for s in arrived) >= 0.8  # none before delay - jitter
            a.delay(0)  # ended: the next one goes at once
            start = loop.time()
            a.send_node_message(b.node_id, "seq", b"100")
            await until(lambda: 100 in arrived, what="the undelayed message")
            assert arrived[100] - start < 0.8
            with pytest.raises(ValueError):
                a.delay(0.1, 0.2)  # jitter beyond the delay

    uvloop.run(main())
