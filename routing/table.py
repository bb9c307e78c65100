"""The routing table of one vhost: exchanges, bindings, the set of queues.

Pure and deterministic (the only randomness, x-local-random's pick, is
injected), so a replicated metadata store can apply the same changes on
every node and get the same table.

Semantics follow RabbitMQ:
- Built-in exchanges exist from the start and can be neither deleted nor
  created anew under the reserved names ("" and "amq.*").
- The default exchange "" routes key K to queue K when that queue exists; its
  bindings are implicit, so nothing can be bound to or from it.
- Redeclaring an exchange must be equivalent: same type, durable, auto-delete,
  internal and alternate-exchange (RabbitMQ compares only that argument).
- Deleting a queue or an exchange deletes every binding it takes part in; an
  auto-delete exchange goes when its last binding as a source goes, which may
  cascade further.
- Routing follows exchange-to-exchange bindings transitively and, when an
  exchange itself matches nothing, its alternate exchange; each exchange is
  visited at most once per message, so cycles end. The alternate is the
  exchange's `alternate-exchange` argument or else what a policy sets
  (`set_policy_alternate`: the argument overrules the policy, as in RabbitMQ;
  the default exchange has none).
- `internal` is only recorded: refusing to publish to an internal exchange
  is the publisher's check (routing through one via bindings is allowed).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from routing.delayed import backing_name, delay_of
from routing.errors import InvalidArgument, NotAllowed, NotFound, PreconditionFailed
from routing.exchange_types import Choice, Headers, Index, check_exchange_arguments, new_index
from routing.model import (
    ALTERNATE_EXCHANGE,
    DEFAULT_EXCHANGE,
    Binding,
    Destination,
    DestinationKind,
    Exchange,
    ExchangeType,
)
from routing.route_memo import KEY_DETERMINED, RouteMemo

QUEUE = DestinationKind.QUEUE
EXCHANGE = DestinationKind.EXCHANGE

BUILTIN_EXCHANGES: tuple[tuple[str, ExchangeType], ...] = (
    (DEFAULT_EXCHANGE, ExchangeType.DIRECT),
    ("amq.direct", ExchangeType.DIRECT),
    ("amq.fanout", ExchangeType.FANOUT),
    ("amq.topic", ExchangeType.TOPIC),
    ("amq.headers", ExchangeType.HEADERS),
    ("amq.match", ExchangeType.HEADERS),
)
RESERVED_PREFIX = "amq."
MAX_NAME_BYTES = 255  # a 0.9.1 shortstr; names must stay usable from there


class _DefaultIndex:
    """The default exchange: every queue is bound by its own name."""

    __slots__ = ("_queues",)

    def __init__(self, queues: set[str]):
        self._queues = queues

    def match(self, routing_key: str, headers: Headers) -> Collection[Destination]:
        if routing_key in self._queues:
            return (Destination(QUEUE, routing_key),)
        return ()


class _ExchangeState:
    __slots__ = ("exchange", "index", "alternate", "exchange_bindings")

    def __init__(self, exchange: Exchange, index: Index | _DefaultIndex):
        self.exchange = exchange
        self.index = index
        self.alternate = exchange.alternate_exchange  # or a policy's (RoutingTable.set_policy_alternate)
        # Bindings from this exchange to exchanges: while zero (and no
        # alternate is needed) routing skips the graph walk entirely.
        self.exchange_bindings = 0


def _kind(value: str) -> DestinationKind:
    try:
        return DestinationKind(value)
    except ValueError:
        raise InvalidArgument(f"invalid destination kind {value!r}") from None


def _reserved(name: str) -> bool:
    return name == DEFAULT_EXCHANGE or name.startswith(RESERVED_PREFIX)


def _local_first(choice: Choice, is_local: Callable[[str, str], bool], vhost: str) -> Choice:
    """x-local-random as RabbitMQ routes it: a queue on the publisher's node
    when one is bound, else any."""

    def pick(pool: Sequence[Destination]) -> Destination:
        here = [d for d in pool if is_local(vhost, d.name)]
        return choice(here or pool)

    return pick


class RoutingTable:
    """Exchanges, bindings and queue names of one vhost."""

    def __init__(self, vhost: str = "/", *, choice: Choice = random.choice,
                 is_local: Callable[[str, str], bool] | None = None):  # fmt: skip
        """`is_local(vhost, queue)`: whether the queue is on this node, so that
        x-local-random picks among those first (None: every queue is)."""
        self.vhost = vhost
        if is_local is not None:
            choice = _local_first(choice, is_local, vhost)
        self._choice = choice
        self._queues: set[str] = set()
        self._memo = RouteMemo()  # cleared by every change below
        self._exchanges: dict[str, _ExchangeState] = {}
        self.delayed_exchanges: set[str] = set()  # x-delayed-message: a publish looks for a delay (vhost.py)
        # Bindings indexed both ways; dicts used as insertion-ordered sets.
        self._by_source: dict[str, dict[Binding, None]] = {}
        self._by_destination: dict[Destination, dict[Binding, None]] = {}
        for name, exchange_type in BUILTIN_EXCHANGES:
            exchange = Exchange(name, exchange_type)
            index = _DefaultIndex(self._queues) if name == DEFAULT_EXCHANGE else new_index(exchange_type, choice)
            self._exchanges[name] = _ExchangeState(exchange, index)

    # -- queues ---------------------------------------------------------------

    def add_queue(self, name: str) -> bool:
        """Record that queue `name` exists; False if it already did."""
        if not name:
            raise InvalidArgument("empty queue name")
        if name in self._queues:
            return False
        self._queues.add(name)
        self._memo.clear()
        return True

    def remove_queue(self, name: str) -> bool:
        """Forget queue `name` and delete its bindings; False if unknown."""
        if name not in self._queues:
            return False
        self._queues.discard(name)
        self._memo.clear()
        self._remove_bindings(list(self._by_destination.get(Destination(QUEUE, name), ())))
        return True

    def has_queue(self, name: str) -> bool:
        return name in self._queues

    def queues(self) -> frozenset[str]:
        return frozenset(self._queues)

    # -- exchanges ------------------------------------------------------------

    def declare_exchange(
        self,
        name: str,
        type: str = ExchangeType.DIRECT,
        *,
        durable: bool = True,
        auto_delete: bool = False,
        internal: bool = False,
        arguments: Mapping[str, Any] | None = None,
    ) -> Exchange:
        """Create an exchange, or check that an existing one is equivalent.
        Returns the exchange as stored."""
        try:
            exchange_type = ExchangeType(type)
        except ValueError:
            raise InvalidArgument(f"unknown exchange type '{type}'") from None
        alternate = (arguments or {}).get(ALTERNATE_EXCHANGE)
        if alternate is not None and not isinstance(alternate, str):
            raise InvalidArgument(f"invalid {ALTERNATE_EXCHANGE} argument {alternate!r}")
        check_exchange_arguments(exchange_type, arguments or {})
        wanted = Exchange(name, exchange_type, durable, auto_delete, internal, arguments or {})
        if name == DEFAULT_EXCHANGE:
            raise NotAllowed("operation not permitted on the default exchange")
        state = self._exchanges.get(name)
        if state is not None:
            _assert_equivalent(state.exchange, wanted)
            return state.exchange
        if _reserved(name):
            raise NotAllowed(f"exchange name '{name}' contains reserved prefix '{RESERVED_PREFIX}*'")
        if len(name.encode()) > MAX_NAME_BYTES:
            raise InvalidArgument(f"exchange name longer than {MAX_NAME_BYTES} bytes")
        self._exchanges[name] = _ExchangeState(wanted, new_index(exchange_type, self._choice, wanted.arguments))
        if exchange_type is ExchangeType.DELAYED_MESSAGE:
            self.delayed_exchanges.add(name)
        self._memo.clear()
        return wanted

    def delete_exchange(self, name: str, *, if_unused: bool = False) -> bool:
        """Delete an exchange and every binding it takes part in; False if it
        did not exist. Built-in exchanges cannot be deleted."""
        if _reserved(name):
            raise NotAllowed(f"deletion of system exchange '{name}' not allowed")
        if name not in self._exchanges:
            return False
        if if_unused and name in self._by_source:
            raise PreconditionFailed(f"exchange '{name}' in vhost '{self.vhost}' in use")
        del self._exchanges[name]
        self.delayed_exchanges.discard(name)
        self._memo.clear()
        outgoing = self._by_source.get(name, {})
        incoming = self._by_destination.get(Destination(EXCHANGE, name), {})
        # dict.fromkeys: a self-binding is in both lists.
        self._remove_bindings(list(dict.fromkeys([*outgoing, *incoming])))
        return True

    def exchange(self, name: str) -> Exchange | None:
        state = self._exchanges.get(name)
        return state.exchange if state is not None else None

    def set_policy_alternate(self, name: str, alternate: str | None) -> None:
        """The alternate exchange a policy gives exchange `name` (None: no
        policy sets one); the exchange's own argument, if any, still wins.
        Nothing for an exchange that does not exist or the default one."""
        state = self._exchanges.get(name)
        if state is None or name == DEFAULT_EXCHANGE:
            return
        own = state.exchange.alternate_exchange
        state.alternate = own if own is not None else alternate
        self._memo.clear()

    def alternate_exchange(self, name: str) -> str | None:
        """The alternate exchange routing follows for `name`: its argument, or a policy's."""
        state = self._exchanges.get(name)
        return state.alternate if state is not None else None

    def exchanges(self) -> list[Exchange]:
        return [state.exchange for state in self._exchanges.values()]

    # -- bindings -------------------------------------------------------------

    def bind(
        self,
        source: str,
        destination_kind: str,
        destination: str,
        binding_key: str = "",
        arguments: Mapping[str, Any] | None = None,
    ) -> bool:
        """Add a binding; False if the same binding already existed."""
        binding = self._binding(source, destination_kind, destination, binding_key, arguments)
        state = self._exchanges.get(source)
        if state is None:
            raise NotFound(f"no exchange '{source}' in vhost '{self.vhost}'")
        if binding.destination_kind is QUEUE:
            if destination not in self._queues:
                raise NotFound(f"no queue '{destination}' in vhost '{self.vhost}'")
        elif destination not in self._exchanges:
            raise NotFound(f"no exchange '{destination}' in vhost '{self.vhost}'")
        index = state.index
        assert not isinstance(index, _DefaultIndex)  # _binding refused source ""
        index.validate(binding)
        bindings = self._by_source.setdefault(source, {})
        if binding in bindings:
            return False
        bindings[binding] = None
        self._by_destination.setdefault(binding.target, {})[binding] = None
        index.add(binding)
        self._memo.clear()
        if binding.destination_kind is EXCHANGE:
            state.exchange_bindings += 1
        return True

    def unbind(
        self,
        source: str,
        destination_kind: str,
        destination: str,
        binding_key: str = "",
        arguments: Mapping[str, Any] | None = None,
    ) -> bool:
        """Remove a binding; False if it did not exist. May auto-delete the
        source exchange."""
        binding = self._binding(source, destination_kind, destination, binding_key, arguments)
        if binding not in self._by_source.get(source, ()):
            return False
        self._remove_bindings([binding])
        return True

    def list_bindings(
        self,
        *,
        source: str | None = None,
        destination_kind: str | None = None,
        destination: str | None = None,
        binding_key: str | None = None,
        arguments: Mapping[str, Any] | None = None,
    ) -> list[Binding]:
        """Explicit bindings matching every filter given (None = any), in
        creation order per source. The default exchange's implicit bindings
        are not listed."""
        if destination_kind is not None:
            destination_kind = _kind(destination_kind)
        candidates: Iterable[Binding]
        if source is not None:
            candidates = self._by_source.get(source, ())
        elif destination_kind is not None and destination is not None:
            candidates = self._by_destination.get(Destination(destination_kind, destination), ())
        else:
            candidates = [b for bindings in self._by_source.values() for b in bindings]
        wanted_args = dict(arguments) if arguments is not None else None
        return [
            b
            for b in candidates
            if (destination_kind is None or b.destination_kind == destination_kind)
            and (destination is None or b.destination == destination)
            and (binding_key is None or b.binding_key == binding_key)
            and (wanted_args is None or dict(b.arguments) == wanted_args)
        ]

    # -- routing --------------------------------------------------------------

    def route(self, exchange: str, routing_key: str, headers: Headers = None) -> set[str]:
        """Names of the queues a message published to `exchange` reaches.
        `headers` (application-properties) matter to headers exchanges only.
        Raises NotFound if the exchange does not exist."""
        if exchange == DEFAULT_EXCHANGE:
            return {routing_key} if routing_key in self._queues else set()
        state = self._exchanges.get(exchange)
        if state is None:
            raise NotFound(f"no exchange '{exchange}' in vhost '{self.vhost}'")
        dests = state.index.match(routing_key, headers)
        if state.exchange_bindings == 0 and (dests or state.alternate is None):
            # The common case: queues only, no graph to walk.
            return {name for _, name in dests}
        return _walk(self._exchanges, self.delayed_exchanges, exchange, state, dests, routing_key, headers)

    def route_keys(self, exchange: str, routing_keys: list[str], headers: Headers = None) -> set[str]:
        """As `route`, for a message with several routing keys (the x-cc annotation): the
        queues any key reaches. As in RabbitMQ, the alternate exchange takes the message
        only when no key reaches a queue of the exchange itself."""
        if exchange == DEFAULT_EXCHANGE:
            return {key for key in routing_keys if key in self._queues}
        state = self._exchanges.get(exchange)
        if state is None:
            raise NotFound(f"no exchange '{exchange}' in vhost '{self.vhost}'")
        if state.exchange_bindings == 0:
            direct = {name for key in routing_keys for _, name in state.index.match(key, headers)}
            if direct or state.alternate is None:
                return direct
        return set().union(*(self.route(exchange, key, headers) for key in routing_keys))

    def targets(self, exchange: str, routing_key: str, headers: Headers = None) -> tuple[str, ...]:
        """As `route`, as a tuple remembered per (exchange, key) while nothing
        changes (routing/route_memo.py): the publish path's lookup."""
        if exchange == DEFAULT_EXCHANGE:
            return (routing_key,) if routing_key in self._queues else ()
        names = self._memo.routes.get((exchange, routing_key))
        if names is None:
            names = tuple(self.route(exchange, routing_key, headers))
            state = self._exchanges[exchange]  # route() raised NotFound otherwise
            if state.exchange.type in KEY_DETERMINED and state.exchange_bindings == 0 and state.alternate is None:
                self._memo.put(exchange, routing_key, names)
        return names

    # -- internals ------------------------------------------------------------

    def _binding(
        self,
        source: str,
        destination_kind: str,
        destination: str,
        binding_key: str,
        arguments: Mapping[str, Any] | None,
    ) -> Binding:
        binding = Binding(source, _kind(destination_kind), destination, binding_key, arguments or {})
        if source == DEFAULT_EXCHANGE or (binding.destination_kind is EXCHANGE and destination == DEFAULT_EXCHANGE):
            raise NotAllowed("operation not permitted on the default exchange")
        return binding

    def _remove_bindings(self, bindings: list[Binding]) -> None:
        """Unlink stored bindings, then auto-delete the sources left without
        any binding (which unlinks more bindings, and so on)."""
        pending = [b.source for b in bindings]
        self._memo.clear()
        for binding in bindings:
            self._unlink(binding)
        while pending:
            name = pending.pop()
            state = self._exchanges.get(name)
            if state is None or not state.exchange.auto_delete or name in self._by_source:
                continue
            del self._exchanges[name]
            self.delayed_exchanges.discard(name)
            incoming = list(self._by_destination.get(Destination(EXCHANGE, name), ()))
            for binding in incoming:
                self._unlink(binding)
                pending.append(binding.source)

    def _unlink(self, binding: Binding) -> None:
        by_source = self._by_source[binding.source]
        del by_source[binding]
        if not by_source:
            del self._by_source[binding.source]
        by_destination = self._by_destination[binding.target]
        del by_destination[binding]
        if not by_destination:
            del self._by_destination[binding.target]
        state = self._exchanges.get(binding.source)
        if state is not None:  # None while its source is being deleted
            index = state.index
            assert not isinstance(index, _DefaultIndex)
            index.remove(binding)
            if binding.destination_kind is EXCHANGE:
                state.exchange_bindings -= 1


def _assert_equivalent(current: Exchange, wanted: Exchange) -> None:
    for field, have, want in (
        ("type", current.type, wanted.type),
        ("durable", current.durable, wanted.durable),
        ("auto_delete", current.auto_delete, wanted.auto_delete),
        ("internal", current.internal, wanted.internal),
        (ALTERNATE_EXCHANGE, current.alternate_exchange, wanted.alternate_exchange),
    ):
        if have != want:
            raise PreconditionFailed(
                f"inequivalent arg '{field}' for exchange '{current.name}': "
                f"received {want!r} but current is {have!r}"
            )


def _walk(exchanges: Mapping[str, _ExchangeState], delayed: set[str], exchange: str, state: _ExchangeState,
          dests: Collection[Destination], routing_key: str, headers: Headers) -> set[str]:  # fmt: skip
    """The queues reached through exchange-to-exchange bindings and alternate exchanges."""
    queues: set[str] = set()
    seen = {exchange}
    pending: list[_ExchangeState] = []

    def push(name: str) -> None:
        if name in delayed and delay_of(headers) > 0:
            # a delayed exchange reached with a delayed message holds it: its queue
            # (routing/delayed.py) stands for the exchange and its bindings
            queues.add(backing_name(name))
            return
        state = exchanges.get(name)
        if state is not None:  # a dangling alternate-exchange is ignored
            pending.append(state)

    while True:
        if dests:
            for kind, name in dests:
                if kind is QUEUE:
                    queues.add(name)
                elif name not in seen:
                    seen.add(name)
                    push(name)
        elif state.alternate is not None and state.alternate not in seen:
            # RabbitMQ follows the alternate exchange only when the
            # exchange itself matched no destination at all.
            seen.add(state.alternate)
            push(state.alternate)
        if not pending:
            return queues
        state = pending.pop()
        dests = state.index.match(routing_key, headers)
