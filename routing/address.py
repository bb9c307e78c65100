"""AMQP address format v2, as RabbitMQ 4 defines it.

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
it parses each `to` with parse_target too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

from routing.errors import AddressError

EXCHANGES_PREFIX = "/exchanges/"
QUEUES_PREFIX = "/queues/"

# RFC 3986 [3.3] pchar = unreserved / pct-encoded / sub-delims / ":" / "@"
_SEGMENT = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})*")

# The name v2 refuses for the default exchange, besides the empty name.
_DEFAULT_EXCHANGE_ALIAS = "amq.default"


@dataclass(frozen=True, slots=True)
class ExchangeTarget:
    """Publish to `exchange`; routing_key None means "use the subject"."""

    exchange: str
    routing_key: str | None = None


@dataclass(frozen=True, slots=True)
class QueueTarget:
    """Publish straight to `queue` (through the default exchange)."""

    queue: str


@dataclass(frozen=True, slots=True)
class QueueSource:
    """Consume from `queue`."""

    queue: str


Target = ExchangeTarget | QueueTarget


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
