"""SQL filter expressions on streams (`amqp:sql-filter`, AMQP Filter
Expressions 1.0 §6, as RabbitMQ 4.2 serves them): a consumer gives a
condition on the header's priority, the properties and the application
properties, and receives only the messages for which it is true.

lexer.py -> parser.py (a tree of nodes.py, bounded in length, nesting and
height) -> evaluate.py (closures, three-valued logic); like.py matches
LIKE patterns in linear time without backtracking. Invalid expressions raise
SqlFilterError when the consumer attaches, never while messages are read.
"""

from __future__ import annotations

from typing import Any

from amqp.errors import DecodeError
from amqp.message import Message
from queues.stream.sql.cost import Cost, estimate
from queues.stream.sql.errors import SqlFilterError
from queues.stream.sql.evaluate import Clock, compile_tree, utc_now_ms
from queues.stream.sql.parser import DEFAULT_MAX_LENGTH, parse

__all__ = ["DEFAULT_MAX_LENGTH", "SQL_FILTER", "SQL_FILTER_CODES", "SqlFilter", "SqlFilterError"]

SQL_FILTER = "amqp:sql-filter"
SQL_FILTER_CODES = frozenset((0x120,))  # its descriptor as a code, as RabbitMQ 4.2 and its clients send it


class SqlFilter:
    __slots__ = ("text", "tree", "cost", "_evaluate")

    def __init__(self, text: str, max_length: int = DEFAULT_MAX_LENGTH, clock: Clock = utc_now_ms) -> None:
        """Raises SqlFilterError for an expression it cannot apply."""
        self.text = text
        self.tree = parse(text, max_length)
        self.cost: Cost = estimate(self.tree)  # per message, in a stream reader's budget (cost.py)
        self._evaluate = compile_tree(self.tree, clock)

    def evaluate(self, message: Message) -> Any:
        """True, False or None (unknown)."""
        return self._evaluate(message)

    def matches(self, message: Message) -> bool:
        try:
            return self._evaluate(message) is True
        except DecodeError:  # a section that does not decode holds nothing the expression can be true of
            return False

    def __repr__(self) -> str:
        return f"SqlFilter({self.text!r})"
