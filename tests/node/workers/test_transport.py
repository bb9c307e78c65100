"""node/workers/transport.py: the queue proxy (node/vhosts/remote_queue.py, unchanged) runs
between two workers over Unix sockets: publishes are confirmed by the owning worker's queue,
a consumer on the other worker gets every message under its credit, and an owning worker
killed with -9 loses no confirmed message: the publisher hears "unknown" for what was in
flight, and once the worker is started again on its store the link comes back by itself."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from types import SimpleNamespace

import uvloop
from eventually import until  # tests/support/
from proxy_ends import Consumer, Host, classic_record, service

from node.vhosts.remote_queue import RemoteQueue
from node.workers.control import address
from node.workers.transport import WorkerTransport
from queues.base import Outcome, QueueMessage, Settlement
from queues.classic import ClassicQueue

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SUPPORT = os.path.join(ROOT, "tests", "support")


def front(data_dir: str) -> WorkerTransport:
    """Worker 0's side: it dials the owning worker."""
    return WorkerTransport(asyncio.get_running_loop(), "worker-0", None, lambda peer: address(data_dir, peer))


def message(i: int, durable: bool = False) -> QueueMessage:
    return QueueMessage(0, f"m{i}".encode(), durable, None, exchange="", routing_keys=["q"])


def test_publishes_confirms_deliveries_and_credit_cross_between_two_workers(tmp_path):
    async def main():
        loop = asyncio.get_running_loop()
        d = str(tmp_path)
        owner = WorkerTransport(loop, "worker-1", address(d, "worker-1"), lambda peer: None)
        await owner.start()
        client = front(d)
        queue = ClassicQueue("/", "q", False, None, False, {}, host=Host(loop))
        owner_side, client_side = service(owner, {"q": queue}), service(client, {})
        proxy = RemoteQueue(SimpleNamespace(queue_service=client_side, loop=loop), "/", classic_record("q", "worker-1"), {})
        try:
            client.add_peer("worker-1")
            await until(lambda: client.is_connected("worker-1") and owner.is_connected("worker-0"), "the link")
            assert client.epoch_to("worker-1") == client.epoch_from("worker-1")
            outcomes: list = []
            for i in range(50):
                proxy.publish(message(i), outcomes.append)
            await until(lambda: len(outcomes) == 50, "50 confirms")
            assert set(outcomes) == {Outcome.ACCEPTED} and queue.message_count == 50
            consumer = Consumer()
            proxy.attach_consumer(consumer)
            proxy.credit(consumer, 0, 20, False, False)
            await until(lambda: len(consumer.got) == 20, "20 deliveries under a credit of 20")
            await asyncio.sleep(0.05)
            assert len(consumer.got) == 20  # no more than the credit
            proxy.settle(consumer, [m.seq for m in consumer.got], Settlement("accepted"))
            proxy.credit(consumer, 20, 30, False, False)
            await until(lambda: len(consumer.got) == 50, "the rest")
            proxy.settle(consumer, [m.seq for m in consumer.got[20:]], Settlement("accepted"))
            assert [m.payload for m in consumer.got] == [f"m{i}".encode() for i in range(50)]
            await until(lambda: queue.message_count == 0 and queue.unacked_count == 0, "all settled on the owner")
        finally:
            client_side.close()
            owner_side.close()
            await client.close()
            await owner.close()

    uvloop.run(asyncio.wait_for(main(), 20))


# The owning worker: a durable classic queue on a real message store, recovered from it at start.
OWNER = """
import asyncio, os, sys
sys.path.insert(0, sys.argv[2])
import uvloop
from proxy_ends import Host, service
from node.workers.control import address
from node.workers.transport import WorkerTransport
from queues.classic import StorePersistence, classic_queue, payload_size
from storage.group_commit import GroupCommitter
from storage.message_store import MessageStore

async def main():
    loop = asyncio.get_running_loop()
    d = sys.argv[1]
    store = MessageStore(os.path.join(d, "messages"), size_of=payload_size)
    persistence = StorePersistence(store, GroupCommitter(store, loop))
    queue = classic_queue("/", "q", True, None, False, {}, host=Host(loop), persistence=persistence)
    if queue.store_key in set(store.indexed_queues()):
        queue.recover_stored(store.take_positions().get(queue.store_key))
    transport = WorkerTransport(loop, "worker-1", address(d, "worker-1"), lambda peer: None)
    await transport.start()
    service(transport, {"q": queue})
    print("ready", queue.message_count, flush=True)
    await asyncio.Event().wait()

uvloop.run(main())
"""


async def start_owner(data_dir: str) -> tuple[asyncio.subprocess.Process, int]:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", OWNER, data_dir, SUPPORT, cwd=ROOT,
                                                stdout=asyncio.subprocess.PIPE)  # fmt: skip
    ready = (await proc.stdout.readline()).split()
    assert ready and ready[0] == b"ready", ready
    return proc, int(ready[1])


def test_an_owning_worker_killed_with_minus_9_loses_no_confirmed_message_and_the_link_comes_back(tmp_path):
    async def main():
        loop = asyncio.get_running_loop()
        d = str(tmp_path)
        proc, held = await start_owner(d)
        assert held == 0
        client = front(d)
        client_side = service(client, {})
        downs: list[str] = []
        client.on_peer_down.append(downs.append)
        proxy = RemoteQueue(SimpleNamespace(queue_service=client_side, loop=loop), "/",
                            classic_record("q", "worker-1", durable=True), {})  # fmt: skip
        outcomes: dict[int, Outcome] = {}
        try:
            client.add_peer("worker-1")
            await until(lambda: client.is_connected("worker-1"), "the link")
            sent = 0
            while len(outcomes) < 200:  # publish until 200 were answered, 20 a turn
                for i in range(sent, sent + 20):
                    proxy.publish(message(i, durable=True), lambda o, i=i: outcomes.__setitem__(i, o))
                sent += 20
                await asyncio.sleep(0.002)
            for i in range(sent, sent + 200):  # more in flight as it dies
                proxy.publish(message(i, durable=True), lambda o, i=i: outcomes.__setitem__(i, o))
            sent += 200
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
            await until(lambda: len(outcomes) == sent, "every publish answered", timeout=10)
            # once per link that ended (a redial may reach the dying worker's socket before it closes)
            assert downs and set(downs) == {"worker-1"}
            confirmed = {i for i, o in outcomes.items() if o is Outcome.ACCEPTED}
            assert set(outcomes.values()) <= {Outcome.ACCEPTED, Outcome.UNKNOWN}
            assert len(confirmed) >= 200
            assert not client.is_connected("worker-1")
            proxy.publish(message(-1), lambda o: outcomes.__setitem__(-1, o))
            assert outcomes[-1] is Outcome.RELEASED  # no link now: the client may try again

            proc, held = await start_owner(d)  # the worker restarted on its store
            assert held >= len(confirmed)
            await until(lambda: client.is_connected("worker-1"), "the link again, dialled by itself")
            consumer = Consumer()
            proxy.attach_consumer(consumer)
            proxy.credit(consumer, 0, held, False, False)
            await until(lambda: len(consumer.got) == held, "every stored message")
            got = {int(m.payload[1:]) for m in consumer.got}
            assert confirmed <= got, f"confirmed and lost: {sorted(confirmed - got)[:10]}"
        finally:
            client_side.close()
            await client.close()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()

    uvloop.run(asyncio.wait_for(main(), 60))
