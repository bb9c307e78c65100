"""What a stream consumer asks for in its source's filter set: where to
start (rabbitmq:stream-offset-spec) and which filter values it wants
(rabbitmq:stream-filter, rabbitmq:stream-match-unfiltered).

Filter values are matched twice: per chunk through its Bloom filter (a
chunk that cannot hold a wanted value is skipped unread), then per message
exactly, so a consumer never receives a message whose value it did not ask
for (a Bloom filter has false positives). AMQP filter expressions on
properties and application-properties (queues/stream/expressions.py) and
the SQL filter (queues/stream/sql/) are checked per message after that, on
one lazily decoded view of the message.

A filter is recognised by its descriptor (symbol or code), as RabbitMQ
does; the filter set's key names it only for values sent undescribed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from amqp.message import Message
from amqp.types import Timestamp
from queues.base import QueueArgumentError
from queues.stream.chunk import BloomFilter, ChunkHeader
from queues.stream.expressions import APPLICATION_PROPERTIES_FILTER, PROPERTIES_FILTER, MessageFilter
from queues.stream.sql import DEFAULT_MAX_LENGTH, SQL_FILTER, SQL_FILTER_CODES, SqlFilter, SqlFilterError

__all__ = ["FILTER", "MATCH_UNFILTERED", "OFFSET_SPEC", "ReadSpec"]

OFFSET_SPEC = "rabbitmq:stream-offset-spec"
FILTER = "rabbitmq:stream-filter"
MATCH_UNFILTERED = "rabbitmq:stream-match-unfiltered"
NAMED_SPECS = ("first", "last", "next")
MAX_FILTER_VALUES = 256
FILTERED_MESSAGE_COST = 1024
DESCRIPTOR_CODES = {0x173: PROPERTIES_FILTER, 0x174: APPLICATION_PROPERTIES_FILTER,
                    **dict.fromkeys(SQL_FILTER_CODES, SQL_FILTER)}  # fmt: skip


@dataclass(frozen=True, slots=True)
class ReadSpec:
    start: str = "next"  # first | last | next | offset | timestamp
    value: int = 0  # the offset, or the timestamp in ms
    filter_values: frozenset[str] | None = None  # None: no filtering
    match_unfiltered: bool = False
    applied: tuple[str, ...] = ()  # the filter-set keys this spec took (echoed in the reply ATTACH)
    expressions: MessageFilter | None = None  # properties / application-properties filters
    sql: SqlFilter | None = None  # amqp:sql-filter
    source: dict | None = field(default=None, compare=False)  # the filter set as sent (a moved reader's, again)

    @classmethod
    def from_filter_set(cls, filters: dict | None, sql_max_length: int = DEFAULT_MAX_LENGTH) -> ReadSpec:
        """Raises QueueArgumentError on a value the broker cannot apply."""
        start, value, values, unfiltered, applied = "next", 0, None, False, []
        expressions = sql = None
        for key, raw in (filters or {}).items():
            name = _filter_name(key, raw)
            v = raw.value if hasattr(raw, "descriptor") else raw
            if name == OFFSET_SPEC:
                start, value = _offset_spec(v)
            elif name == FILTER:
                values = _filter_values(v)
            elif name == MATCH_UNFILTERED:
                if not isinstance(v, bool):
                    raise QueueArgumentError(f"{MATCH_UNFILTERED} must be a boolean, not {v!r}")
                unfiltered = v
            elif name in (PROPERTIES_FILTER, APPLICATION_PROPERTIES_FILTER):
                expressions = MessageFilter.parse(name, v, expressions)
            elif name == SQL_FILTER:
                if sql is not None:
                    raise QueueArgumentError(f"one {SQL_FILTER} per link: join the conditions with AND")
                sql = _sql_filter(v, sql_max_length)
            else:
                continue  # not ours: not applied, so not echoed
            applied.append(key)
        if values is None and unfiltered:
            unfiltered = False  # nothing to filter: every message comes anyway
        return cls(start, value, values, unfiltered, tuple(applied), expressions, sql, dict(filters or {}))

    def filter_set_from(self, offset: int) -> dict:
        """The filter set again, starting at `offset`: for a reader that goes on through another node."""
        kept = {str(k): v for k, v in (self.source or {}).items() if _filter_name(k, v) != OFFSET_SPEC}
        return {**kept, OFFSET_SPEC: offset}

    # -- filtering ---------------------------------------------------------------------

    @property
    def message_cost(self) -> int:
        """What examining one message with the per-message filters counts for in a reader's
        per-turn budget (queues/stream/readers.py), in bytes: about as long as reading 1 KiB,
        plus the SQL expression's own work."""
        if self.expressions is None and self.sql is None:
            return 0
        return FILTERED_MESSAGE_COST + (self.sql.cost.per_message if self.sql is not None else 0)

    @property
    def message_cost_per_byte(self) -> int:
        """And per byte of the message: LIKE patterns read values as long as the message at most."""
        return self.sql.cost.per_byte if self.sql is not None else 0

    @property
    def filtering(self) -> bool:
        return self.filter_values is not None

    def chunk_may_match(self, header: ChunkHeader, bloom: bytes) -> bool:
        if self.filter_values is None:
            return True
        if self.match_unfiltered and header.has_unfiltered:
            return True
        bf = BloomFilter(0, bloom)
        return any(bf.may_contain(v) for v in self.filter_values)

    def matches(self, filter_value: str | None, payload: bytes) -> bool:
        if self.filter_values is not None:
            if filter_value is None and not self.match_unfiltered:
                return False
            if filter_value is not None and filter_value not in self.filter_values:
                return False
        if self.expressions is None and self.sql is None:
            return True
        message = Message.from_bytes(payload)  # sections decode when a filter first reads them, once
        if self.expressions is not None and not self.expressions.matches(message):
            return False
        return self.sql is None or self.sql.matches(message)


def _filter_name(key: Any, raw: Any) -> str:
    descriptor = getattr(raw, "descriptor", None)
    if isinstance(descriptor, str):
        return str(descriptor)
    if isinstance(descriptor, int):  # an unknown code names no filter Warren applies
        return DESCRIPTOR_CODES.get(descriptor, f"descriptor code {descriptor:#x}")
    return str(key)


def _sql_filter(v: Any, max_length: int) -> SqlFilter:
    if not isinstance(v, str):
        raise QueueArgumentError(f"invalid {SQL_FILTER}: the expression must be a string, not {type(v).__name__}")
    try:
        return SqlFilter(v, max_length)
    except SqlFilterError as e:
        raise QueueArgumentError(f"invalid {SQL_FILTER}: {e}") from None


def _offset_spec(v: Any) -> tuple[str, int]:
    if isinstance(v, Timestamp):
        return "timestamp", int(v)
    if isinstance(v, str) and v in NAMED_SPECS:
        return v, 0
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        return "offset", int(v)
    raise QueueArgumentError(f"invalid {OFFSET_SPEC} {v!r}: first, last, next, an offset or a timestamp")


def _filter_values(v: Any) -> frozenset[str]:
    items = [v] if isinstance(v, str) else list(v) if isinstance(v, (list, tuple)) else None
    if not items or len(items) > MAX_FILTER_VALUES or not all(isinstance(i, str) for i in items):
        raise QueueArgumentError(f"invalid {FILTER} {v!r}: a string or a list of 1 to {MAX_FILTER_VALUES} strings")
    return frozenset(items)
