"""RabbitMQ 3.10's own shovel plugin sending into Warren over AMQP 1.0 (its
Erlang client, amqp10_client), as an operator moving off RabbitMQ would run
it: every message arrives once, in order, and RabbitMQ's queue is left empty.

That plugin (before RabbitMQ 3.13) treats running out of link credit as a
crash: its forward matches `ok` on the client's send, which answers
`{error, insufficient_credit}` when the shovel outruns the credit, and the
worker restarts after its reconnect-delay (5 s), sending again what Warren had
already taken (duplicates). It forwards each message the moment its source
delivers it, up to src-prefetch-count at once, so it needs Warren's publisher
credit to cover that burst: src-prefetch-count at most half of
`publisher_credit` (Warren grants again when half is used), or a larger
`publisher_credit`. Both ways are run here (docs/compatibility.md)."""

from __future__ import annotations

import os

import pytest
from cluster_procs import free_ports
from rabbit_setup import rabbit_node_class
from shovel_helpers import nothing_left, publish, receive, wait_until

from node.config import Config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

MESSAGES = 5000


@pytest.fixture(scope="module")
def rabbit():
    RabbitNode = rabbit_node_class()
    amqp, mgmt, dist = free_ports(3)
    node = RabbitNode(amqp_port=amqp, mgmt_port=mgmt, dist_port=dist, plugins=("rabbitmq_shovel",),
                      nodename=f"warren_shovel_plugin_{os.getpid()}@localhost")  # fmt: skip
    with node:
        yield node


@pytest.mark.parametrize(
    ("settings", "prefetch"),
    [({}, Config.publisher_credit // 2), ({"publisher_credit": 2048, "session_window": 2048}, 1000)],
    ids=["default-credit-prefetch-half-of-it", "credit-and-window-2048-default-prefetch"],
)
def test_rabbitmq_shovel_plugin_moves_every_message_into_warren_once(rabbit, broker_factory, settings, prefetch):
    node = broker_factory(http_port=0, metrics_port=0, **settings)
    source, dest = f"plugin-src-{prefetch}", f"plugin-dst-{prefetch}"
    rabbit.declare_queue(source, durable=True)
    rabbit_url = f"amqp://guest:guest@127.0.0.1:{rabbit.amqp_port}"
    bodies = [f"m{i}" for i in range(MESSAGES)]
    publish(rabbit_url, f"/amq/queue/{source}", bodies)  # each settled by RabbitMQ before the next: confirmed
    node.declare_queue(dest, durable=True)
    shovel = {"src-protocol": "amqp091", "src-uri": "amqp://", "src-queue": source,
              "dest-protocol": "amqp10", "dest-uri": f"amqp://guest:guest@127.0.0.1:{node.port}",
              "dest-address": f"/queues/{dest}", "ack-mode": "on-confirm", "src-prefetch-count": prefetch}  # fmt: skip
    rabbit.api("PUT", f"/api/parameters/shovel/%2F/into-warren-{prefetch}", {"value": shovel})
    try:
        got = [bytes(m.body) for m in receive(node.url, f"/queues/{dest}", MESSAGES, timeout=120)]
        # RabbitMQ 3.10 keeps what its AMQP 1.0 plugin took as the encoded sections, and its shovel sends
        # those as a data section: each ends with the amqp-value string (str8: 0xa1, length, bytes)
        assert len(got) == MESSAGES
        # once each, in order: a restarted plugin sends again what it had not had confirmed
        assert all(g.endswith(b"\xa1" + bytes([len(b)]) + b.encode()) for g, b in zip(got, bodies, strict=True))
        # RabbitMQ's statistics lag its queue by a few seconds
        wait_until(lambda: rabbit.queue_info(source).get("messages") == 0, 30, "RabbitMQ's queue to empty")
        # a message sent twice would come after the last one: the queue must stay empty
        assert nothing_left(node.url, f"/queues/{dest}", wait=1.0)
    finally:
        rabbit.api("DELETE", f"/api/parameters/shovel/%2F/into-warren-{prefetch}")
