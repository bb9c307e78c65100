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
