"""A consumer that grants a large credit and never reads its socket: the
node buffers at most about `max_write_buffer` for it, the rest waits in the
queue, and every message arrives once it reads."""

from __future__ import annotations

import time

from raw_client import RawClient

from queues.base import QueueMessage

MESSAGES = 20_000
BODY = 1000
LIMIT = 256 * 1024


def _payload(i: int) -> bytes:
    body = f"{i:08d}".encode().ljust(BODY, b"x")
    return b"\x00\x53\x75\xb0" + len(body).to_bytes(4, "big") + body  # one data section


def _fill(broker, queue: str) -> None:
    def publish() -> None:
        q = broker.queue(queue)
        for i in range(MESSAGES):
            q.publish(QueueMessage(0, _payload(i), routing_keys=[queue]), None)

    broker.call(publish)


def test_a_consumer_that_does_not_read_is_not_fed_past_the_write_buffer(broker_factory):
    b = broker_factory(max_write_buffer=LIMIT)
    b.declare_queue("big", durable=False)
    _fill(b, "big")
    client = RawClient(b.port)
    try:
        client.connect()
        session = client.begin()
        link = client.receiver(session, "/queues/big", settled=True)
        link.flow(link_credit=MESSAGES)
        client.flush()  # and from now on we read nothing

        def state() -> tuple[int, bool, int]:
            [conn] = list(b.broker.connections)
            # what the node holds for the client: the socket writer's buffer,
            # frames not yet written, transfers held by the session window
            engine = conn.engine
            held = sum(len(frame) for s in engine.sessions.values() for _, frame, _ in s._waiting if frame)
            buffered = conn.transport.get_write_buffer_size() + sum(map(len, engine.out)) + held
            left = b.queue("big").message_count
            return buffered, getattr(conn, "writing_paused", False) or left == 0, left

        # the node stops feeding the link once the client's socket is full
        deadline = time.monotonic() + 10
        while not (snapshot := b.call(state))[1]:
            assert time.monotonic() < deadline, f"never paused: {snapshot}"
            time.sleep(0.01)
        buffered, _, left_in_queue = b.call(state)
        assert buffered < 2 * LIMIT, buffered
        assert left_in_queue > MESSAGES // 2  # waiting in the queue, not in a buffer
        # the client reads: everything arrives, in order, none lost
        got = client.receive(MESSAGES, timeout=60)
        numbers = [int(bytes(x.payload)[-BODY:][:8]) for x in got]
        assert numbers == list(range(MESSAGES))
        assert b.call(lambda: b.queue("big").message_count) == 0
    finally:
        client.close()
