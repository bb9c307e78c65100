"""Direct Reply-To as RabbitMQ's clients ask for it, with python-qpid-proton (tests/support/:
shared by the single-node, cluster and workers tests): a dynamic receiver whose source is
volatile and expires with its link."""

from __future__ import annotations

from proton import Data, Terminus
from proton.reactor import AtMostOnce, LinkOption
from proton.utils import BlockingConnection

VOLATILE = "rabbitmq:volatile-queue"


class VolatileSource(LinkOption):
    """What RabbitMQ's clients send for Direct Reply-To (`capability` None: the same without it)."""

    def __init__(self, capability: str | None = VOLATILE) -> None:
        self.capability = capability

    def apply(self, link) -> None:
        link.source.expiry_policy = Terminus.EXPIRE_WITH_LINK
        link.source.durability = Terminus.NONDURABLE
        if self.capability:
            link.source.capabilities.put_array(False, Data.SYMBOL)
            link.source.capabilities.enter()
            link.source.capabilities.put_symbol(self.capability)
            link.source.capabilities.exit()


def requester(conn: BlockingConnection, credit: int = 10):
    """A requester's reply receiver; its address is `.link.remote_source.address`."""
    return conn.create_receiver(None, dynamic=True, credit=credit, options=[AtMostOnce(), VolatileSource()])


def round_trip(asking: BlockingConnection, answering: BlockingConnection, queue: str) -> None:
    """One request through `queue` from `asking`, answered by `answering` to its reply address:
    the reply must come back to `asking`."""
    from proton import Message

    replies = requester(asking)
    reply_to = replies.link.remote_source.address
    asking.create_sender(f"/queues/{queue}").send(Message(body="ping", id="rpc-1", reply_to=reply_to))
    requests = answering.create_receiver(f"/queues/{queue}")
    request = requests.receive(timeout=10)
    requests.accept()
    delivery = answering.create_sender(None).send(Message(body="pong", address=request.reply_to,
                                                          correlation_id=request.id))  # fmt: skip
    assert delivery.remote_state == delivery.ACCEPTED
    reply = replies.receive(timeout=10)
    assert (reply.body, reply.correlation_id) == ("pong", "rpc-1")
