"""AMQP addresses as RabbitMQ 4 reads them: format v2, and the deprecated v1.

Targets:
    /exchanges/:exchange/:routing-key   publish to an exchange with a fixed key
    /exchanges/:exchange                routing key = the message's subject
    /queues/:queue                      publish to one queue (default exchange)
Sources:
    /queues/:queue

Every name is one percent-encoded path segment (RFC 3986). A raw '/', a raw
non-ASCII character or a broken '%' escape inside a segment is an error, as
in RabbitMQ's amqp_address_SUITE (`/queues/missing/encoding`, `/queues/✋`,
`/queues/missing%encoding` are all rejected). The default exchange cannot be
named in an exchange address (`/exchanges/`, `/exchanges/amq.default/...`):
v2 reaches it only through `/queues/:queue`. A null target (anonymous relay,
each message's `to` holds one of the target forms) is the session's business;
it parses each `to` with parse_target too (v2 only, as in RabbitMQ 4).

Format v1 (RabbitMQ 3.x, still accepted by RabbitMQ 4 unless its deprecated
feature `amqp_address_v1` is denied; docs "AMQP 1.0", "Address v1"). Names
are raw, not percent-encoded; only "%2F" stands for a '/'.
Targets:
    /exchange/:exchange/:routing-key    a fixed key ("" means: the subject)
    /exchange/:exchange                 routing key = the message's subject
    /topic/:routing-key                 amq.topic with that key
    /amq/queue/:queue                   the queue, which must exist
    /queue/:queue, :queue               the queue, declared if missing
    /queue                              the queue named by the subject
Sources:
    /exchange/:exchange/:binding-key    a new server-named queue bound to the
    /exchange/:exchange                 exchange with that key ("" if none)
    /topic/:binding-key                 ... bound to amq.topic
    /amq/queue/:queue                   the queue, which must exist
    /queue/:queue, :queue               the queue, declared if missing
parse_link_target / parse_link_source read an ATTACH's address: a string
that starts with a v2 prefix is v2, anything else is v1 (RabbitMQ's rule).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

from routing.errors import AddressError

EXCHANGES_PREFIX = "/exchanges/"
QUEUES_PREFIX = "/queues/"
DEFAULT_EXCHANGE = ""
TOPIC_EXCHANGE = "amq.topic"  # v1 /topic/:key
# How a client recognises the refusal of a v1 address (RabbitMQ's error term).
V1_NOT_PERMITTED = "amqp_address_v1_not_permitted"

# RFC 3986 [3.3] pchar = unreserved / pct-encoded / sub-delims / ":" / "@"
_SEGMENT = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})*")

# The name v2 refuses for the default exchange, besides the empty name.
_DEFAULT_EXCHANGE_ALIAS = "amq.default"


@dataclass(frozen=True, slots=True)
class ExchangeTarget:
    """Publish to `exchange`; routing_key None means "use the subject".
    The default exchange ("") comes only from v1 `/queue`."""

    exchange: str
    routing_key: str | None = None


@dataclass(frozen=True, slots=True)
class QueueTarget:
    """Publish straight to `queue` (through the default exchange);
    `declare`: v1 `/queue/:queue`, which declares a missing queue."""

    queue: str
    declare: bool = False


@dataclass(frozen=True, slots=True)
class QueueSource:
    """Consume from `queue`; `declare` as for QueueTarget."""

    queue: str
    declare: bool = False


@dataclass(frozen=True, slots=True)
class ExchangeSource:
    """v1 only: consume from a new server-named queue bound to `exchange`
    with `binding_key`."""

    exchange: str
    binding_key: str


Target = ExchangeTarget | QueueTarget
Source = QueueSource | ExchangeSource


def quote_segment(name: str) -> str:
    """Percent-encode a name as one path segment (UTF-8, nothing kept but
    RFC 3986 unreserved characters)."""
    return quote(name, safe="")


def unquote_segment(segment: str) -> str:
    """Decode one percent-encoded path segment, refusing raw characters that
    need encoding, broken escapes and escapes that are not UTF-8."""
    if _SEGMENT.fullmatch(segment) is None:
        raise AddressError(f"address segment is not percent-encoded: {segment!r}")
    try:
        return unquote(segment, errors="strict")
    except UnicodeDecodeError:
        raise AddressError(f"address segment is not UTF-8: {segment!r}") from None


def parse_target(address: object) -> Target:
    """Parse a v2 target address (also used for a message's `to`)."""
    if not isinstance(address, str):
        raise AddressError(f"bad address {address!r}")
    if address.startswith(EXCHANGES_PREFIX):
        return _parse_exchange_target(address)
    if address.startswith(QUEUES_PREFIX):
        return QueueTarget(_parse_queue_name(address))
    raise AddressError(f"bad address {address!r}")


def parse_source(address: object) -> QueueSource:
    """Parse a v2 source address: only queues can be consumed from."""
    if not isinstance(address, str) or not address.startswith(QUEUES_PREFIX):
        raise AddressError(f"bad address {address!r}")
    return QueueSource(_parse_queue_name(address))


def exchange_address(exchange: str, routing_key: str | None = None) -> str:
    """Build `/exchanges/:exchange[/:routing-key]`; None omits the key (the
    subject will be used), "" keeps an explicit empty key."""
    if exchange in ("", _DEFAULT_EXCHANGE_ALIAS):
        raise AddressError("the default exchange has no v2 exchange address")
    address = EXCHANGES_PREFIX + quote_segment(exchange)
    if routing_key is not None:
        address += "/" + quote_segment(routing_key)
    return address


def queue_address(queue: str) -> str:
    """Build `/queues/:queue`."""
    if not queue:
        raise AddressError("empty queue name")
    return QUEUES_PREFIX + quote_segment(queue)


def format_target(target: Target) -> str:
    if isinstance(target, ExchangeTarget):
        return exchange_address(target.exchange, target.routing_key)
    return queue_address(target.queue)


def format_source(source: QueueSource) -> str:
    return queue_address(source.queue)


def _parse_exchange_target(address: str) -> ExchangeTarget:
    segments = address[len(EXCHANGES_PREFIX):].split("/")
    if len(segments) > 2:
        raise AddressError(f"bad address {address!r}: unencoded '/'")
    exchange = unquote_segment(segments[0])
    if exchange in ("", _DEFAULT_EXCHANGE_ALIAS):
        raise AddressError(f"bad address {address!r}: use /queues/:queue for the default exchange")
    if len(segments) == 1:
        return ExchangeTarget(exchange, None)
    return ExchangeTarget(exchange, unquote_segment(segments[1]))


def _parse_queue_name(address: str) -> str:
    segment = address[len(QUEUES_PREFIX):]
    if "/" in segment:
        raise AddressError(f"bad address {address!r}: unencoded '/'")
    queue = unquote_segment(segment)
    if not queue:
        raise AddressError(f"bad address {address!r}: empty queue name")
    return queue


# ---------------------------------------------------------------- ATTACH addresses, v2 or v1


def parse_link_target(address: object, permit_v1: bool) -> Target:
    """An ATTACH's target address (not null: a null target is the anonymous
    relay). Refused with invalid-field when it is v1 and v1 is not permitted."""
    if isinstance(address, str) and not address.startswith((EXCHANGES_PREFIX, QUEUES_PREFIX)):
        _check_v1_permitted(address, permit_v1)
        return _parse_v1(address, source=False)  # type: ignore[return-value]
    return parse_target(address)


def parse_link_source(address: object, permit_v1: bool) -> Source:
    """An ATTACH's source address, v2 or (when permitted) v1."""
    if isinstance(address, str) and not address.startswith(QUEUES_PREFIX):
        _check_v1_permitted(address, permit_v1)
        return _parse_v1(address, source=True)  # type: ignore[return-value]
    return parse_source(address)


def _check_v1_permitted(address: str, permit_v1: bool) -> None:
    if not permit_v1:
        raise AddressError(f"Attach refused: {V1_NOT_PERMITTED} {address!r}: address format v1 is turned off "
                           "on this node; use /queues/:queue or /exchanges/:exchange/:routing-key")  # fmt: skip


def _parse_v1(address: str, source: bool) -> Target | Source:
    segments = address.split("/")
    if len(segments) == 1:  # a bare queue name: /queue/:queue
        return _v1_queue(address, segments, source, declare=True)
    if segments[0] != "":
        raise AddressError(f"bad address {address!r}")
    kind, rest = segments[1], segments[2:]
    if kind == "amq" and rest[:1] == ["queue"]:
        return _v1_queue(address, rest[1:], source, declare=False)
    if kind == "queue":
        if not rest and not source:
            return ExchangeTarget(DEFAULT_EXCHANGE, None)  # the queue is the message's subject
        return _v1_queue(address, rest, source, declare=True)
    if kind == "topic":
        key = _v1_name(address, rest)
        return ExchangeSource(TOPIC_EXCHANGE, key) if source else ExchangeTarget(TOPIC_EXCHANGE, key)
    if kind == "exchange" and len(rest) in (1, 2):
        exchange = _v1_name(address, rest[:1])
        key = _v1_unescape(rest[1]) if len(rest) == 2 else ""
        # an empty or missing key: the subject for a target, "" for a binding
        return ExchangeSource(exchange, key) if source else ExchangeTarget(exchange, key or None)
    raise AddressError(f"bad address {address!r}")


def _v1_queue(address: str, rest: list[str], source: bool, declare: bool) -> Target | Source:
    queue = _v1_name(address, rest)
    return QueueSource(queue, declare) if source else QueueTarget(queue, declare)


def _v1_name(address: str, rest: list[str]) -> str:
    """The one non-empty segment left of a v1 address."""
    if len(rest) != 1 or not rest[0]:
        raise AddressError(f"bad address {address!r}")
    return _v1_unescape(rest[0])


def _v1_unescape(segment: str) -> str:
    return segment.replace("%2F", "/")  # v1's one escape (upper case only)
