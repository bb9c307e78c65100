"""The tree a parsed SQL filter expression becomes: small frozen dataclasses,
checked when built (parser.py) and turned into closures once
(evaluate.py), never walked per message."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from queues.stream.sql.like import LikePattern

__all__ = [
    "And", "Arithmetic", "Compare", "Field", "In", "IsNull", "Like", "Literal", "Node", "Not", "Or", "Unary", "Utc",
]  # fmt: skip


class Node:
    """Any expression."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Literal(Node):
    value: Any  # int, float, str, bytes or bool


@dataclass(frozen=True, slots=True)
class Field(Node):
    section: str  # "header" | "properties" | "application_properties"
    name: str  # the attribute of amqp.definitions' Header / Properties, or the application property's key


@dataclass(frozen=True, slots=True)
class Utc(Node):
    """UTC(): the current time in milliseconds since the epoch."""


@dataclass(frozen=True, slots=True)
class Unary(Node):
    op: str  # + or -: a number keeps or changes its sign; anything else is unknown
    operand: Node


@dataclass(frozen=True, slots=True)
class Arithmetic(Node):
    op: str  # + - * / %
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Compare(Node):
    op: str  # = <> < > <= >=
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class And(Node):
    operands: tuple[Node, ...]  # a chain a AND b AND c is one node: the tree stays shallow


@dataclass(frozen=True, slots=True)
class Or(Node):
    operands: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Not(Node):
    operand: Node


@dataclass(frozen=True, slots=True)
class IsNull(Node):
    operand: Node


@dataclass(frozen=True, slots=True)
class In(Node):
    operand: Node
    values: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Like(Node):
    operand: Node
    pattern: LikePattern
