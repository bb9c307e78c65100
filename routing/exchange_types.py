"""One routing index per exchange type (RabbitMQ: rabbit_exchange_type_*).

Each index is built when bindings change so that routing a message is a
lookup, not a scan of the bindings: direct is a dict by key, fanout a set,
topic a trie, headers a list of pre-compiled patterns, consistent hash a
ring of buckets (routing/consistent_hash.py). `match` returns a
collection of destinations it may own: callers iterate it and never keep it.

Counts (destination -> number of bindings) are kept because one destination
can be bound several times (other keys or arguments) and must stay routable
until its last binding goes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from routing.consistent_hash import ConsistentHashIndex
from routing.consistent_hash import check_arguments as check_consistent_hash_arguments
from routing.delayed import check_arguments as check_delayed_arguments
from routing.delayed import underlying_type
from routing.errors import PreconditionFailed
from routing.headers import HeadersMatcher
from routing.message_facts import MessageFacts, application_properties
from routing.model import Binding, Destination, DestinationKind, ExchangeType
from routing.topic import TopicTrie

# A message's application-properties, a function that decodes them, or the
# message (routing/message_facts.py): only a headers or consistent hash exchange
# reads them, so a publish to any other exchange never pays for decoding them
# (they may be megabytes).
Headers = MessageFacts
Choice = Callable[[Sequence[Destination]], Destination]

_NOTHING: tuple[Destination, ...] = ()


def _incr(counts: dict[Destination, int], dest: Destination) -> None:
    counts[dest] = counts.get(dest, 0) + 1


def _decr(counts: dict[Destination, int], dest: Destination) -> None:
    n = counts[dest]
    if n == 1:
        del counts[dest]
    else:
        counts[dest] = n - 1


class DirectIndex:
    __slots__ = ("_by_key",)

    def __init__(self) -> None:
        self._by_key: dict[str, dict[Destination, int]] = {}

    def validate(self, binding: Binding) -> None:
        pass

    def add(self, binding: Binding) -> None:
        _incr(self._by_key.setdefault(binding.binding_key, {}), binding.target)

    def remove(self, binding: Binding) -> None:
        dests = self._by_key[binding.binding_key]
        _decr(dests, binding.target)
        if not dests:
            del self._by_key[binding.binding_key]

    def match(self, routing_key: str, headers: Headers) -> Collection[Destination]:
        return self._by_key.get(routing_key, _NOTHING)


class FanoutIndex:
    __slots__ = ("_dests",)

    def __init__(self) -> None:
        self._dests: dict[Destination, int] = {}

    def validate(self, binding: Binding) -> None:
        pass

    def add(self, binding: Binding) -> None:
        _incr(self._dests, binding.target)

    def remove(self, binding: Binding) -> None:
        _decr(self._dests, binding.target)

    def match(self, routing_key: str, headers: Headers) -> Collection[Destination]:
        return self._dests


class TopicIndex:
    __slots__ = ("_trie",)

    def __init__(self) -> None:
        self._trie: TopicTrie[Destination] = TopicTrie()

    def validate(self, binding: Binding) -> None:
        pass

    def add(self, binding: Binding) -> None:
        self._trie.bind(binding.binding_key, binding.target)

    def remove(self, binding: Binding) -> None:
        self._trie.unbind(binding.binding_key, binding.target)

    def match(self, routing_key: str, headers: Headers) -> Collection[Destination]:
        return self._trie.match(routing_key)


class HeadersIndex:
    """Patterns are compiled once per binding; a message is tested against
    each of them (headers matching has no key to index on)."""

    __slots__ = ("_compiled",)

    def __init__(self) -> None:
        self._compiled: dict[Binding, tuple[HeadersMatcher, Destination]] = {}

    def validate(self, binding: Binding) -> None:
        HeadersMatcher(binding.arguments)

    def add(self, binding: Binding) -> None:
        self._compiled[binding] = (HeadersMatcher(binding.arguments), binding.target)

    def remove(self, binding: Binding) -> None:
        del self._compiled[binding]

    def match(self, routing_key: str, headers: Headers) -> Collection[Destination]:
        if not self._compiled:
            return _NOTHING
        values = application_properties(headers) or {}
        return [dest for matcher, dest in self._compiled.values() if matcher.matches(values)]


class LocalRandomIndex:
    """x-local-random: one queue among all bound, picked by `choice`. On a
    single node every queue is local. As in RabbitMQ, only queues may be
    bound and only with the empty key (the routing key is ignored)."""

    __slots__ = ("_dests", "_pool", "_choice")

    def __init__(self, choice: Choice) -> None:
        self._dests: dict[Destination, int] = {}
        self._pool: tuple[Destination, ...] = ()
        self._choice = choice

    def validate(self, binding: Binding) -> None:
        if binding.destination_kind is not DestinationKind.QUEUE:
            raise PreconditionFailed("only queues can be bound to an x-local-random exchange")
        if binding.binding_key:
            raise PreconditionFailed(f"non empty binding key {binding.binding_key!r} not permitted")

    def add(self, binding: Binding) -> None:
        _incr(self._dests, binding.target)
        self._pool = tuple(self._dests)

    def remove(self, binding: Binding) -> None:
        _decr(self._dests, binding.target)
        self._pool = tuple(self._dests)

    def match(self, routing_key: str, headers: Headers) -> Collection[Destination]:
        pool = self._pool
        if len(pool) <= 1:
            return pool
        return (self._choice(pool),)


Index = DirectIndex | FanoutIndex | TopicIndex | HeadersIndex | LocalRandomIndex | ConsistentHashIndex


def check_exchange_arguments(exchange_type: ExchangeType, arguments: Mapping[str, Any]) -> None:
    """The arguments an exchange type reads itself, refused (PreconditionFailed)
    when bad; the others' arguments are stored and ignored, as RabbitMQ's."""
    if exchange_type is ExchangeType.CONSISTENT_HASH:
        check_consistent_hash_arguments(arguments)
    elif exchange_type is ExchangeType.DELAYED_MESSAGE:
        check_delayed_arguments(arguments)


def new_index(exchange_type: ExchangeType, choice: Choice, arguments: Mapping[str, Any] | None = None) -> Index:
    if exchange_type is ExchangeType.DELAYED_MESSAGE:
        # routes as its x-delayed-type; the delay itself is node/vhosts/vhost.py's (routing/delayed.py)
        exchange_type = underlying_type(arguments or {})
    if exchange_type is ExchangeType.DIRECT:
        return DirectIndex()
    if exchange_type is ExchangeType.FANOUT:
        return FanoutIndex()
    if exchange_type is ExchangeType.TOPIC:
        return TopicIndex()
    if exchange_type is ExchangeType.HEADERS:
        return HeadersIndex()
    if exchange_type is ExchangeType.CONSISTENT_HASH:
        return ConsistentHashIndex(arguments or {})
    return LocalRandomIndex(choice)
