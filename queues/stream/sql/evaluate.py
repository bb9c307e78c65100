"""A parsed SQL filter expression compiled into closures over one message.

Values are Python's: numbers (int and float; AMQP's integer types and
timestamps are ints), strings (string and symbol), bytes (binary), booleans,
and None for NULL, which is also what an absent field or property reads as.
Conditions have three values, True, False and None (unknown), combined as
SQL does (JMS 3.1 §3.8.1.2, tables 3-4 to 3-6); a message matches only when
the whole expression is True.

Types follow RabbitMQ 4.2, which clients written against it rely on:
`=` compares like types (any two numbers are alike), `<>` is its negation,
the orderings hold between two numbers or two strings (or two binaries)
and are false for anything else; arithmetic on anything but numbers, a
division by zero or `%` on a non-integer are unknown; `/` divides exactly
(7 / 2 = 3.5). Integer results leave 64 bits as floats, so no expression
makes numbers (and the work on them) grow per operation.

Message sections are decoded on first reference and kept for the rest of
the evaluation (amqp/message.py): an expression on application properties
never decodes the properties section, and the reverse.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable
from typing import Any

from amqp.message import Message
from queues.stream.sql.nodes import (
    And,
    Arithmetic,
    Compare,
    Field,
    In,
    IsNull,
    Like,
    Literal,
    Node,
    Not,
    Or,
    Unary,
    Utc,
)

__all__ = ["Clock", "Evaluator", "compile_tree", "equal"]

Clock = Callable[[], int]  # milliseconds since the epoch
Evaluator = Callable[[Message], Any]
INT_MIN, INT_MAX = -(1 << 63), (1 << 64) - 1
ORDERINGS = {"<": operator.lt, ">": operator.gt, "<=": operator.le, ">=": operator.ge}


def utc_now_ms() -> int:
    return time.time_ns() // 1_000_000


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def equal(a: Any, b: Any) -> bool:
    """`=` on two non-NULL values: like types only, numbers of any kind alike."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)):
        return isinstance(b, (int, float)) and a == b
    if isinstance(a, str):
        return isinstance(b, str) and a == b
    return type(a) is type(b) and a == b


def _ordered(a: Any, b: Any) -> bool:
    if _number(a):
        return _number(b)
    if isinstance(a, str):
        return isinstance(b, str)
    return type(a) is bytes and type(b) is bytes


def _bounded(r: Any) -> Any:
    if type(r) is int and not INT_MIN <= r <= INT_MAX:
        return float(r)
    return r


def _arithmetic(op: str, a: Any, b: Any) -> Any:
    if not _number(a) or not _number(b):
        return None
    if op == "+":
        return _bounded(a + b)
    if op == "-":
        return _bounded(a - b)
    if op == "*":
        return _bounded(a * b)
    if op == "/":
        return None if b == 0 else a / b
    if isinstance(a, float) or isinstance(b, float) or b == 0:  # %: integers only
        return None
    r = abs(a) % abs(b)
    return -r if a < 0 else r  # the remainder takes the dividend's sign, as in Java and Erlang


def compile_tree(node: Node, clock: Clock = utc_now_ms) -> Evaluator:
    """One closure per node, built once; recursion is bounded by the tree's height (parser.MAX_HEIGHT)."""
    build = _BUILDERS.get(type(node))
    if build is None:
        raise TypeError(f"not an expression node: {node!r}")
    return build(node, clock)


def _literal(node: Literal, clock: Clock) -> Evaluator:
    value = node.value
    return lambda m: value


def _field(node: Field, clock: Clock) -> Evaluator:
    name = node.name
    if node.section == "header":  # priority: 4 when the header or the field is absent [3.2.1]
        return lambda m: m.priority
    if node.section == "properties":
        get = operator.attrgetter(name)

        def prop(m: Message) -> Any:
            p = m.properties
            return None if p is None else get(p)

        return prop

    def app(m: Message) -> Any:
        ap = m.application_properties
        return ap.get(name) if isinstance(ap, dict) else None

    return app


def _utc(node: Utc, clock: Clock) -> Evaluator:
    return lambda m: clock()


def _unary(node: Unary, clock: Clock) -> Evaluator:
    f = compile_tree(node.operand, clock)
    if node.op == "-":
        return lambda m: -v if _number(v := f(m)) else None
    return lambda m: v if _number(v := f(m)) else None


def _arith(node: Arithmetic, clock: Clock) -> Evaluator:
    f, g, op = compile_tree(node.left, clock), compile_tree(node.right, clock), node.op
    return lambda m: _arithmetic(op, f(m), g(m))


def _compare(node: Compare, clock: Clock) -> Evaluator:
    f, g = compile_tree(node.left, clock), compile_tree(node.right, clock)
    if node.op in ("=", "<>"):
        different = node.op == "<>"

        def eq(m: Message) -> Any:
            a, b = f(m), g(m)
            if a is None or b is None:
                return None
            return equal(a, b) is not different

        return eq
    order = ORDERINGS[node.op]

    def ordering(m: Message) -> Any:
        a, b = f(m), g(m)
        if a is None or b is None:
            return None
        return _ordered(a, b) and order(a, b)

    return ordering


def _and(node: And, clock: Clock) -> Evaluator:
    operands = tuple(compile_tree(n, clock) for n in node.operands)

    def all_true(m: Message) -> Any:
        result: Any = True
        for f in operands:
            v = f(m)
            if v is False:
                return False  # false AND anything is false, unknown included
            if v is not True:
                result = None
        return result

    return all_true


def _or(node: Or, clock: Clock) -> Evaluator:
    operands = tuple(compile_tree(n, clock) for n in node.operands)

    def any_true(m: Message) -> Any:
        result: Any = False
        for f in operands:
            v = f(m)
            if v is True:
                return True
            if v is not False:
                result = None
        return result

    return any_true


def _not(node: Not, clock: Clock) -> Evaluator:
    f = compile_tree(node.operand, clock)

    def negated(m: Message) -> Any:
        v = f(m)
        return (not v) if isinstance(v, bool) else None

    return negated


def _is_null(node: IsNull, clock: Clock) -> Evaluator:
    f = compile_tree(node.operand, clock)
    return lambda m: f(m) is None


def _in(node: In, clock: Clock) -> Evaluator:
    f = compile_tree(node.operand, clock)
    if all(isinstance(v, Literal) for v in node.values):
        # the usual case, x IN ('a', 'b', ...): a set lookup per message, not a pass over the list
        literals = [v.value for v in node.values]
        strings = frozenset(v for v in literals if isinstance(v, str))
        numbers = frozenset(v for v in literals if _number(v))
        rest = [v for v in literals if not isinstance(v, str) and not _number(v)]

        def among(m: Message) -> Any:
            v = f(m)
            if v is None:
                return None
            if isinstance(v, str):
                return v in strings
            if _number(v):
                return v in numbers
            return any(equal(v, x) for x in rest)

        return among
    values = tuple(compile_tree(v, clock) for v in node.values)

    def among_values(m: Message) -> Any:
        v = f(m)
        if v is None:
            return None
        return any((x := g(m)) is not None and equal(v, x) for g in values)

    return among_values


def _like(node: Like, clock: Clock) -> Evaluator:
    f, pattern = compile_tree(node.operand, clock), node.pattern

    def like(m: Message) -> Any:
        v = f(m)
        return pattern.matches(v) if isinstance(v, str) else None  # LIKE on NULL or a non-string: unknown

    return like


_BUILDERS: dict[type, Callable[[Any, Clock], Evaluator]] = {
    Literal: _literal, Field: _field, Utc: _utc, Unary: _unary, Arithmetic: _arith, Compare: _compare,
    And: _and, Or: _or, Not: _not, IsNull: _is_null, In: _in, Like: _like,
}  # fmt: skip
