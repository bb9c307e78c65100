"""Sources and targets beyond their address (node/client/termini.py): the
filters a client asks for and Warren does not apply are not echoed back
[3.5.3], and a transaction coordinator is refused, not taken for an
anonymous relay."""

from __future__ import annotations

import pytest
from proton import Terminus, symbol
from proton.reactor import Filter, LinkOption
from proton.utils import BlockingConnection, LinkDetached

pytestmark = pytest.mark.timeout(60)

SELECTOR = symbol("apache.org:selector-filter:string")


class CoordinatorTarget(LinkOption):
    def apply(self, link) -> None:
        link.target.type = Terminus.COORDINATOR
        link.target.address = None


def test_filters_not_applied_are_not_echoed(broker):
    broker.declare_queue("q")
    conn = BlockingConnection(broker.url, timeout=10)
    try:
        receiver = conn.create_receiver("/queues/q", options=Filter({SELECTOR: "colour = 'red'"}))
        assert receiver.link.remote_source.address == "/queues/q"
        assert receiver.link.source.filter.format()  # sent...
        assert not receiver.link.remote_source.filter.format()  # ...and the client learns none applies
    finally:
        conn.close()


def test_a_transaction_coordinator_is_refused(broker):
    conn = BlockingConnection(broker.url, timeout=10)
    try:
        with pytest.raises(LinkDetached, match="not-implemented.*Transactions not supported"):
            conn.create_sender(None, options=CoordinatorTarget())
    finally:
        conn.close()
