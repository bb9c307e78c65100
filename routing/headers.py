"""Headers exchange matching, with rabbit_exchange_type_headers semantics.

A binding's arguments are the pattern; the message's headers are its
application-properties (RabbitMQ also lets x- message annotations take part;
the caller may merge them into the mapping it passes).

- `x-match` is `all` (the default when absent), `any`, `all-with-x` or
  `any-with-x`; any other value, or a non-string, makes the binding invalid.
- `x-match` itself never takes part. Other keys starting with `x-` take part
  only with the `-with-x` variants.
- A pattern value of None (AMQP null, "void" in 0.9.1) matches the mere
  presence of the header, whatever its value.
- Otherwise values compare by value like Erlang's `==`: 1 matches 1.0, but a
  boolean never matches a number (Python's True == 1 does not leak through),
  and a string matches the binary of its UTF-8 encoding.
- With no key left to compare, `all` matches every message and `any` none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from routing.errors import PreconditionFailed

X_MATCH = "x-match"
_MODES = {"all": (True, False), "any": (False, False), "all-with-x": (True, True), "any-with-x": (False, True)}

# Marks a pattern entry that only asks for the header to be present.
_PRESENT = object()
# What a lookup returns for a header the message lacks (None is a value).
_ABSENT = object()


def validate_arguments(arguments: Mapping[str, Any] | None) -> None:
    """Refuse an unknown x-match, as RabbitMQ's validate_binding does."""
    _mode(arguments or {})


def _mode(arguments: Mapping[str, Any]) -> tuple[bool, bool]:
    value = arguments.get(X_MATCH, "all")
    if not isinstance(value, str) or value not in _MODES:
        raise PreconditionFailed(
            f"invalid x-match field value {value!r}; expected all, any, all-with-x, or any-with-x"
        )
    return _MODES[value]


def values_equal(expected: Any, actual: Any) -> bool:
    """Erlang-style equality of a pattern value and a header value."""
    if expected == actual:
        # Python's bool is an int; AMQP's boolean is not a number.
        return (type(expected) is bool) is (type(actual) is bool)
    if isinstance(expected, str):
        return isinstance(actual, bytes | bytearray) and expected.encode() == actual
    if isinstance(expected, bytes | bytearray):
        return isinstance(actual, str) and expected == actual.encode()
    return False


class HeadersMatcher:
    """One binding's arguments, compiled once at bind time."""

    __slots__ = ("match_all", "items")

    def __init__(self, arguments: Mapping[str, Any] | None):
        arguments = arguments or {}
        self.match_all, with_x = _mode(arguments)
        self.items: tuple[tuple[str, Any], ...] = tuple(
            (key, _PRESENT if value is None else value)
            for key, value in arguments.items()
            if key != X_MATCH and (with_x or not (isinstance(key, str) and key.startswith("x-")))
        )

    def matches(self, headers: Mapping[str, Any] | None) -> bool:
        # Hot path: one dict lookup per key (a sentinel, since None is a
        # header value), no allocation.
        if headers is None:
            headers = {}
        get = headers.get
        if self.match_all:
            for key, expected in self.items:
                actual = get(key, _ABSENT)
                if actual is _ABSENT:
                    return False
                if expected is not _PRESENT and not values_equal(expected, actual):
                    return False
            return True
        for key, expected in self.items:
            actual = get(key, _ABSENT)
            if actual is not _ABSENT and (expected is _PRESENT or values_equal(expected, actual)):
                return True
        return False


def headers_match(arguments: Mapping[str, Any] | None, headers: Mapping[str, Any] | None) -> bool:
    """One-off match (tests, management previews); routing compiles once."""
    return HeadersMatcher(arguments).matches(headers)
