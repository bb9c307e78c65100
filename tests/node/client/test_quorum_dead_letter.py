"""At-least-once dead-lettering from a quorum queue
(x-dead-letter-strategy at-least-once, with x-overflow reject-publish, as
RabbitMQ requires): a dead letter stays in the queue's holding area until
every target queue confirmed it. While the dead-letter exchange is missing
or routes nowhere it stays, and it leaves once the topology appears; a
node that restarts (a new leader) sends again what is still held."""

from __future__ import annotations

import pytest
from proton import Message
from proton.utils import BlockingConnection

from queues import quorum as qq

pytestmark = pytest.mark.timeout(90)

ARGS = {"x-queue-type": "quorum", "x-dead-letter-exchange": "dlx", "x-dead-letter-strategy": "at-least-once",
        "x-overflow": "reject-publish"}  # fmt: skip


def _reject_one(broker, body: str) -> None:
    conn = BlockingConnection(broker.url, timeout=10)
    try:
        sender = conn.create_sender("/queues/src")
        sender.send(Message(body=body))
        receiver = conn.create_receiver("/queues/src", credit=1)
        assert receiver.receive(timeout=10).body == body
        receiver.reject()
        receiver.close()  # the DETACH answer comes after the rejection reached the queue
    finally:
        conn.close()


def _held(broker) -> int:
    """Dead letters in the holding area, once the consumer commands sent so
    far are applied (a quorum queue's purge waits for them)."""
    queue = broker.queue("src")
    broker.call(queue.purge)
    return broker.call(lambda: qq.overview(queue.state)["dlx_holding"])


def _add_dead_letter_topology(broker, bind: bool = True) -> None:
    async def topology():
        if broker.vhost.routing.exchange("dlx") is None:
            await broker.vhost.declare_exchange("dlx", "fanout")
        await broker.vhost.declare_queue("dlq", True, None, False, {})
        if bind:
            await broker.vhost.bind("dlx", "queue", "dlq")

    broker.call(topology)


def _dead_lettered(broker) -> str:
    conn = BlockingConnection(broker.url, timeout=10)
    try:
        receiver = conn.create_receiver("/queues/dlq", credit=1)
        message = receiver.receive(timeout=20)  # the leader's next sweep re-sends it
        receiver.accept()
        return message.body
    finally:
        conn.close()


def test_a_dead_letter_waits_for_a_missing_exchange_and_then_a_route(broker):
    broker.declare_queue("src", **ARGS)
    _reject_one(broker, "no exchange yet")
    _add_dead_letter_topology(broker, bind=False)  # routes nowhere: still held
    assert _held(broker) == 1
    _add_dead_letter_topology(broker)
    assert _dead_lettered(broker) == "no exchange yet"


def test_a_restarted_leader_sends_what_its_holding_area_kept(broker_factory, tmp_path):
    first = broker_factory(tmp_path / "node")
    first.declare_queue("src", **ARGS)
    _reject_one(first, "survives a restart")
    assert _held(first) == 1
    first.stop()
    second = broker_factory(tmp_path / "node")
    assert _held(second) == 1
    _add_dead_letter_topology(second)
    assert _dead_lettered(second) == "survives a restart"
