"""Helpers for tests that drive a node with RabbitMQ's own AMQP 1.0 client
(rabbitmq-amqp-python-client): connections, raw management requests, and a
consumer that settles each message as told and stops after n."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

from rabbitmq_amqp_python_client import (
    AMQPMessagingHandler,
    Environment,
    Event,
    Management,
    Message,
    RecoveryConfiguration,
)

# What a test may do with a delivery: the names of DeliveryContext's methods.
ACCEPT, REQUEUE, DISCARD = "accept", "requeue", "discard"


class Enough(Exception):
    """Raised by a handler to leave consumer.run()."""


@contextmanager
def connection(port: int, user: str = "guest", password: str = "guest", vhost: str = ""):
    """A dialled client connection; `vhost` goes in the URI path
    ("vhost:<name>" in OPEN). Closed with its environment on exit. No
    automatic recovery: a refused connection would be retried forever."""
    env = Environment(f"amqp://{user}:{password}@127.0.0.1:{port}/{vhost}",
                      recovery_configuration=RecoveryConfiguration(active_recovery=False))  # fmt: skip
    try:
        conn = env.connection()
        conn.dial()
        yield conn
    finally:
        try:
            env.close()
        except BaseException:  # a connection the test broke on purpose
            pass


def request(management: Management, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """A raw management request on the client's link pair: (status, body)
    whatever the status (Management.request raises on unexpected ones and
    turns 409 into ErrPreconditionFailed before looking at the rest)."""
    management._sender.send(Message(id=str(uuid.uuid4()), body=body, inferred=False, reply_to="$me", address=path,
                                    subject=method, durable=False))  # fmt: skip
    reply = management._receiver.receive(timeout=10)
    return int(reply.subject), reply.body


class Settler(AMQPMessagingHandler):
    """Settles each delivery with `decide(message)` (a DeliveryContext
    method name, optionally with annotations) and keeps the messages; stops
    consumer.run() after `n`."""

    def __init__(self, n: int, decide: Callable[[Any], str | tuple[str, dict]]):
        super().__init__()
        self.n = n
        self.decide = decide
        self.messages: list[Any] = []

    def on_message(self, event: Event) -> None:
        # The client reads message annotations unguarded (x-stream-offset):
        # it depends on the broker adding x-exchange and x-routing-key.
        assert event.message.annotations is not None
        if isinstance(event.message.body, memoryview):  # data sections come as views of the frame
            event.message.body = bytes(event.message.body)
        super().on_message(event)

    def on_amqp_message(self, event: Event) -> None:
        self.messages.append(event.message)
        action = self.decide(event.message)
        if isinstance(action, tuple):
            name, annotations = action
            getattr(self.delivery_context, f"{name}_with_annotations")(event, annotations)
        else:
            getattr(self.delivery_context, action)(event)
        if len(self.messages) >= self.n:
            raise Enough()


def consume(conn: Any, address: str, n: int, decide: Callable[[Any], Any] = lambda m: ACCEPT) -> list[Any]:
    """Consumes n messages from `address`, settling each as `decide` says."""
    handler = Settler(n, decide)
    consumer = conn.consumer(address, message_handler=handler)
    try:
        consumer.run()
    except Enough:
        pass
    finally:
        consumer.close()
    return handler.messages
