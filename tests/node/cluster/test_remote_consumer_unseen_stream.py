"""A consumer proxied to a classic queue on another node, when the client's node fails the
consumer because a stream from the queue's node ended that the queue's node never saw up.

Found by chaos seed 13 on five nodes: the queue's node kept trying to open its stream back to
the client's node after a partition; the client's node accepted each try, but the accept never
reached the queue's node, which gave the try up after 3 s. For the client's node a stream from
the queue's node ended, so it failed the consumer (its link detached, the client attached a new
one); for the queue's node no stream ended. The first consumer's attach was meanwhile held by
the queue's node for want of a stream back (node/vhosts/answer_gate.py) and was handled once the
stream came: the queue checked messages out to a consumer no link stood for, up to its credit,
and never got them back (78 confirmed messages undelivered through the drain).

Two real NodeTransports on loopback and the real QueueService at both ends, around a real
ClassicQueue; the client's side of the unseen stream's end is its transport's peer-down report."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import uvloop
from eventually import until  # tests/support/
from proxy_ends import Consumer, Host, classic_record, service

from node.vhosts.remote_queue import RemoteQueue
from queues.base import QueueMessage, Settlement
from queues.classic import ClassicQueue
from raft.transport import NodeTransport, TransportOptions

OPTIONS = TransportOptions(backoff_initial=0.01, backoff_max=0.2)
CREDIT = 20


def test_a_consumer_failed_on_a_stream_end_the_queue_node_never_saw_holds_no_messages():
    async def main():
        client, owner = (NodeTransport(listen="127.0.0.1:0", secret="unseen", options=OPTIONS) for _ in range(2))
        await client.start()
        await owner.start()
        loop = asyncio.get_running_loop()
        queue = ClassicQueue("/", "q", False, None, False, {}, host=Host(loop))
        owner_side = service(owner, {"q": queue})
        client_side = service(client, {})
        proxy = RemoteQueue(SimpleNamespace(queue_service=client_side, loop=loop), "/", classic_record("q", owner.node_id), {})
        try:
            client.add_peer(owner.node_id)
            owner.add_peer(client.node_id)
            await until(lambda: client.is_connected(owner.node_id) and owner.is_connected(client.node_id), "streams")

            owner.partition([client.node_id], inbound=False)  # no stream back: the client's stream to it stays
            await until(lambda: owner.epoch_to(client.node_id) is None, "the owner's stream to the client gone")
            first = Consumer()
            proxy.attach_consumer(first)
            proxy.credit(first, 0, CREDIT, False, False)
            await until(lambda: owner_side._gate._held, "the attach held by the owner for want of a stream back")

            client._peer_down(owner.node_id)  # a stream from the owner ended that the owner never saw up
            assert first.ended == "amqp:link:detach-forced"
            second = Consumer()  # the client attaches again through the same node
            proxy.attach_consumer(second)
            proxy.credit(second, 0, CREDIT, False, False)

            owner.heal()
            await until(lambda: owner.epoch_to(client.node_id) is not None, "the owner's stream back")
            for i in range(CREDIT + 10):
                queue.publish(QueueMessage(0, f"m{i}".encode(), False, None, exchange="", routing_keys=["q"]), None)
            await until(lambda: len(second.got) == CREDIT, "the second consumer's credit used")
            proxy.settle(second, [m.seq for m in second.got], Settlement("accepted"))
            proxy.credit(second, CREDIT, CREDIT, False, False)
            await until(lambda: len(second.got) == CREDIT + 10, f"every message to the live consumer ({second.got})")
            assert first.got == []
            assert [m.payload for m in second.got] == [f"m{i}".encode() for i in range(CREDIT + 10)]
            assert queue.consumer_count == 1  # only the live link's consumer on the owner
        finally:
            client_side.close()
            owner_side.close()
            await client.close()
            await owner.close()

    uvloop.run(main())
