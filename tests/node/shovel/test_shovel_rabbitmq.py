"""A shovel with the real thing as its source: RabbitMQ 3.10 (Debian's
rabbitmq-server with its AMQP 1.0 plugin, run privately by bench/rabbitmq.py)
holds messages in a durable classic queue, addressed the plugin's way
(/amq/queue/NAME); a Warren shovel with ack-mode on-confirm moves them into a
Warren queue, and RabbitMQ's queue is left empty only because Warren took
every message."""

from __future__ import annotations

import os
import time

import pytest
from cluster_procs import free_ports
from rabbit_setup import rabbit_node_class
from shovel_helpers import publish, receive

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]



@pytest.fixture(scope="module")
def rabbit():
    RabbitNode = rabbit_node_class()
    amqp, mgmt, dist = free_ports(3)
    node = RabbitNode(amqp_port=amqp, mgmt_port=mgmt, dist_port=dist, nodename=f"warren_shovel_{os.getpid()}@localhost")
    with node:
        yield node


def test_a_rabbitmq_classic_queue_moves_into_warren_on_confirm(rabbit, node, api):
    rabbit.declare_queue("orders", durable=True)
    rabbit_url = f"amqp://guest:guest@127.0.0.1:{rabbit.amqp_port}"
    first = [f"order-{i}" for i in range(500)]
    publish(rabbit_url, "/amq/queue/orders", first)  # proton waits for RabbitMQ to settle each: confirmed
    assert api.put("/api/queues/%2F/orders", {"durable": True}).status == 201
    shovel = {"src-protocol": "amqp10", "src-uri": rabbit_url, "src-address": "/amq/queue/orders",
              "dest-protocol": "local", "dest-uri": "amqp://", "dest-queue": "orders", "ack-mode": "on-confirm",
              "src-prefetch-count": 100}  # fmt: skip
    assert api.put("/api/parameters/shovel/%2F/from-rabbit", {"value": shovel}).status == 201
    later = [f"order-{i}" for i in range(500, 600)]
    publish(rabbit_url, "/amq/queue/orders", later)  # while the shovel runs
    got = [m.body for m in receive(node.url, "/queues/orders", 600, timeout=60)]
    assert got == first + later
    deadline = time.monotonic() + 20  # RabbitMQ's statistics lag its queue by a few seconds
    while rabbit.queue_info("orders").get("messages") != 0:
        assert time.monotonic() < deadline, rabbit.queue_info("orders")
        time.sleep(0.5)
    [status] = api.get("/api/shovels").body
    assert status["state"] == "running" and status["forwarded"] == 600
    assert status["src_uri"] == f"amqp://guest@127.0.0.1:{rabbit.amqp_port}"


def test_warren_to_rabbitmq_through_an_exchange_address(rabbit, node, api):
    """The other way, with the plugin's /exchange/X/KEY address: back out to RabbitMQ on-confirm."""
    rabbit.declare_queue("returns", durable=True)
    rabbit.api("POST", "/api/bindings/%2F/e/amq.direct/q/returns", {"routing_key": "back"})
    rabbit_url = f"amqp://guest:guest@127.0.0.1:{rabbit.amqp_port}"
    assert api.put("/api/queues/%2F/outbox", {"durable": True}).status == 201
    bodies = [f"r{i}" for i in range(200)]
    publish(node.url, "/queues/outbox", bodies)
    shovel = {"src-protocol": "local", "src-uri": "amqp://", "src-queue": "outbox",
              "dest-protocol": "amqp10", "dest-uri": rabbit_url, "dest-address": "/exchange/amq.direct/back",
              "src-delete-after": "queue-length"}  # fmt: skip
    assert api.put("/api/parameters/shovel/%2F/to-rabbit", {"value": shovel}).status == 201
    got = [m.body for m in receive(rabbit_url, "/amq/queue/returns", 200, timeout=60)]
    assert got == bodies
    deadline = time.monotonic() + 20  # done: the shovel deletes itself
    while api.get("/api/parameters/shovel/%2F/to-rabbit").status != 404:
        assert time.monotonic() < deadline
        time.sleep(0.1)
