"""The volatile queue: Direct Reply-To's reply address (RabbitMQ 4.2's
rabbit_volatile_queue, REFERENCE.md).

One requester's receiving link is the whole queue: it holds no message and
is never in the metadata store. A message published to it goes straight to
the link when the link has credit, and is dropped otherwise (counted as
dropped for "maxlen" with no dead-letter exchange, RabbitMQ's metric). The
publish is confirmed at once, whatever became of the message, so a
responder's credit never waits on a requester. At most once: the link is
pre-settled, nothing is redelivered, settlements are no-ops.

The name says where the link is and cannot be guessed:
`amq.rabbitmq.reply-to.<node>.<key>`, `<node>` the hosting node's id in
base64url, `<key>` 16 random bytes in base64url (node/vhosts/volatile_queues.py
finds the queue, here or over the cluster).
"""

from __future__ import annotations

import base64
import binascii
import os

from amqp import serial
from queues.base import ConfirmCallback, Consumer, Outcome, Queue, QueueHost, QueueMessage, Settlement

__all__ = ["PREFIX", "QueueExclusive", "VolatileQueue", "is_volatile", "new_name", "node_of"]

PREFIX = "amq.rabbitmq.reply-to."
TYPE_NAME = "volatile"
_KEY_BYTES = 16  # 128 random bits: a reply address cannot be guessed
_NO_ARGUMENTS: dict = {}


class QueueExclusive(ValueError):
    """A second consumer: only the requester's own link consumes."""


def is_volatile(name: str) -> bool:
    return name.startswith(PREFIX)


def new_name(node_id: str) -> str:
    node = base64.urlsafe_b64encode(node_id.encode()).decode().rstrip("=")
    key = base64.urlsafe_b64encode(os.urandom(_KEY_BYTES)).decode().rstrip("=")
    return f"{PREFIX}{node}.{key}"


def node_of(name: str) -> str | None:
    """The id of the node a volatile queue's name points at; None when the
    name is not one this broker could have made."""
    if not name.startswith(PREFIX):
        return None
    node, dot, key = name[len(PREFIX) :].partition(".")
    if not dot or not node or not key:
        return None
    try:
        decoded = base64.b64decode(node + "=" * (-len(node) % 4), altchars=b"-_", validate=True).decode()
    except (binascii.Error, ValueError):
        return None
    return decoded or None


class VolatileQueue(Queue):
    """A requester's reply address and its link, as one queue."""

    type_name = TYPE_NAME

    def __init__(self, host: QueueHost, vhost: str, name: str) -> None:
        super().__init__(vhost, name, False, None, True, {})
        self.arguments = self.effective_arguments = _NO_ARGUMENTS  # one shared dict: never set, no policy applies
        self.host = host
        self.consumer: Consumer | None = None
        self.delivery_count = 0  # the link's, as the queue counts its sends
        self.link_credit = 0
        self._seq = 0

    def publish(self, message: QueueMessage, confirm: ConfirmCallback | None) -> None:
        consumer = self.consumer
        if consumer is not None and self.link_credit > 0 and not self.deleted:
            self.link_credit -= 1
            self.delivery_count = serial.add(self.delivery_count, 1)
            self._seq += 1
            message.seq = self._seq
            consumer.deliver(self, message)
        else:
            self.host.count_dropped(self, "maxlen", 1)
        if confirm is not None:
            confirm(Outcome.ACCEPTED)  # taken, whether or not the requester got it: at most once

    def attach_consumer(self, consumer: Consumer, priority: int = 0) -> None:
        if self.consumer is not None and self.consumer is not consumer:
            raise QueueExclusive(f"queue '{self.name}' has its consumer already")
        self.consumer = consumer

    def detach_consumer(self, consumer: Consumer) -> None:
        if consumer is self.consumer:
            self.consumer = None
            self.delete()

    def credit(self, consumer: Consumer, delivery_count: int, link_credit: int, drain: bool, echo: bool) -> None:
        if consumer is not self.consumer or self.deleted:
            return
        # [2.6.7] credit = delivery-count(receiver) + link-credit(receiver) - delivery-count(sender)
        credit = serial.diff(serial.add(delivery_count, link_credit), self.delivery_count)
        self.link_credit = max(0, credit)
        if drain:  # nothing is ever waiting: the drain uses up the credit at once
            self.delivery_count = serial.add(self.delivery_count, self.link_credit)
            self.link_credit = 0
        if drain or echo:
            consumer.credit_reply(self.delivery_count, self.link_credit, 0, drain)

    def settle(self, consumer: Consumer, seqs: list[int], settlement: Settlement) -> None:
        pass  # replies go pre-settled: nothing to settle

    def purge(self) -> int:
        return 0

    def delete(self) -> int:
        if not self.deleted:
            self.deleted = True
            self.consumer = None
            self.host.queue_deleted(self)
        return 0

    @property
    def message_count(self) -> int:
        return 0

    @property
    def consumer_count(self) -> int:
        return 0 if self.consumer is None else 1
