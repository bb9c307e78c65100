"""The credit lease of a quorum queue's consumer on a node without a replica.

Such a consumer is served through remote_queue.py by a replica's node (the
leader's, usually). Each client FLOW goes there over the node transport,
becomes a `Credit` command behind the publishes in the queue's log, and the
deliveries it allows come back over the transport: with a publisher keeping
the leader busy that round trip took ~43 ms, and a client topping up ~500
at a time then received ~500 messages per round trip (~12k msg/s) while the
queue grew behind it (docs/benchmarks.md, "the proxied consumer").

So the consumer's node asks for the client's credit plus a lease of as much
again (at most `quorum_consumer_lease`), and a CreditGate
(queues/quorum/credit_lease.py) per link passes on only what the client's
own credit allows, holding the rest in delivery order: the client's next
FLOW is served from the hold at once, here, while its credit travels. The
same gate a follower keeps for its local links, with the same terms: never
for a drain or a pre-settled consumer, a held message is checked out to the
consumer (returned marked redelivered when it detaches), and credit replies
are answered in the client's terms. The serving node sees a larger credit
and nothing else, so nodes of any version serve it. A serving node that is a
follower (the leader unreachable) adds its own lease to this one: at most
the lease twice over, both bounded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from queues.quorum.credit_lease import CreditGate

__all__ = ["ProxyLeases"]


class ProxyLeases:
    """The gates of the leased consumer links of this node's remote quorum queues."""

    def __init__(self, lease: Callable[[], int]) -> None:
        self._lease = lease  # the setting, read at each grant
        self.gates: dict[int, CreditGate] = {}  # the link's cid (remote_queue.py) ->

    def add(self, cid: int, presettled: bool) -> None:
        """A consumer link attached: leased from its first FLOW (a pre-settled one never)."""
        if not presettled:
            self.gates[cid] = CreditGate()

    def drop(self, cid: int) -> None:
        """The link ended: what its gate held goes back to the queue with its detach."""
        self.gates.pop(cid, None)

    def grant(self, cid: int, delivery_count: int, link_credit: int, drain: bool) -> tuple[int, list]:
        """The client's FLOW: (the credit to ask the serving node for, the held messages it lets through now)."""
        gate = self.gates.get(cid)
        if gate is None:
            return link_credit, []
        lease = 0 if drain or link_credit <= 0 else min(link_credit, max(0, self._lease()))
        return link_credit + lease, gate.grant(delivery_count, link_credit, lease)

    def admit(self, cid: int, message: Any) -> list:
        """A delivery from the serving node: in a list if the client's credit lets it through now."""
        gate = self.gates.get(cid)
        return [message] if gate is None else gate.admit([message])

    def reply(self, cid: int, delivery_count: int, credit: int, available: int, drain: bool) -> tuple[int, int, int]:
        """The serving node's credit reply in the client's terms (delivery-count, credit, available)."""
        gate = self.gates.get(cid)
        if gate is None:
            return delivery_count, credit, available
        return gate.reply(delivery_count, credit, available, drain)

    def held(self, cid: int) -> int:
        gate = self.gates.get(cid)
        return 0 if gate is None else len(gate.held)
