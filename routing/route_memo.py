"""What an exchange routed a key to, remembered until the routing table changes.

Publishing to the same exchange with the same key repeats the same lookup:
a fanout's destinations, a direct exchange's bucket, a topic trie walk, each
turned into a set of names per message. The memo keeps the answer as a tuple
per (exchange, routing key), so a publish costs one dict lookup here and the
caller one lookup per target queue. Only answers that depend on nothing but
the key are kept: headers exchanges read the message, x-local-random draws
at random, and a walk over exchange-to-exchange bindings or an alternate
exchange may reach one of those. Any change to the table clears it all
(topology changes are rare next to publishes).
"""

from __future__ import annotations

from routing.model import ExchangeType

__all__ = ["KEY_DETERMINED", "RouteMemo"]

KEY_DETERMINED = frozenset((ExchangeType.DIRECT, ExchangeType.FANOUT, ExchangeType.TOPIC))
MAX_ROUTES = 4096  # distinct (exchange, key) pairs kept; past that it starts over


class RouteMemo:
    __slots__ = ("routes",)

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], tuple[str, ...]] = {}

    def put(self, exchange: str, routing_key: str, names: tuple[str, ...]) -> None:
        if len(self.routes) >= MAX_ROUTES:
            self.routes.clear()
        self.routes[(exchange, routing_key)] = names

    def clear(self) -> None:
        if self.routes:
            self.routes.clear()
