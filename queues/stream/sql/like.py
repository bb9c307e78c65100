"""LIKE patterns (`%` any run of characters, `_` exactly one, ESCAPE making
the next character literal), matched without backtracking.

A pattern is compiled once, at attach, into the cheapest of three matchers:

- no wildcard: string equality;
- `%` only: its literal segments. The first must start the value, the last
  end it, the others are found left to right, each at its first place after
  the previous one (`str.find`). Taking the first place is never wrong: it
  leaves the most room for what follows. Each search starts where the
  previous one ended, so the searches together cover the value once;
- with `_`: a bit-parallel NFA (shift-and). Bit i of one integer says "the
  first i pattern items match what was read"; each character of the value
  updates every state at once with a few integer operations on a
  (pattern length + 1)-bit integer, and the loop stops as soon as no state
  is alive.

So matching does at most len(value) steps, each a fixed number of
operations on at most len(pattern) / 64 + 1 machine words: O(len(value) x
len(pattern) / 64) in the worst case, with the pattern's length bounded by
the expression's (the setting stream_sql_filter_max_length). A backtracking
matcher (a regular expression) takes exponential time on patterns such as
`%a%a%a%a%b` against `aaaa...` (CVE-2026-67240); `Work` lets a test count
the steps on such inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from queues.stream.sql.errors import SqlFilterError

__all__ = ["LikePattern", "Work"]

ANY_ONE, ANY_RUN = object(), object()  # `_` and `%` among the literal characters of a parsed pattern


class Work:
    """Counts matching steps (characters advanced over), for tests that bound the work."""

    __slots__ = ("steps",)

    def __init__(self) -> None:
        self.steps = 0


def _items(pattern: str, escape: str | None) -> list[Any]:
    """The pattern as literal characters, ANY_ONE and ANY_RUN (runs of `%` collapsed: `%%` is `%`)."""
    items: list[Any] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if escape is not None and c == escape:
            if i + 1 == n:
                raise SqlFilterError(f"LIKE pattern {pattern!r} ends with its escape character")
            items.append(pattern[i + 1])
            i += 2
            continue
        if c == "%":
            if not items or items[-1] is not ANY_RUN:
                items.append(ANY_RUN)
        else:
            items.append(ANY_ONE if c == "_" else c)
        i += 1
    return items


@dataclass(frozen=True, slots=True)
class LikePattern:
    pattern: str
    escape: str | None = None
    _match: Any = field(default=None, init=False, compare=False, repr=False)
    words: int = field(default=0, init=False, compare=False, repr=False)  # 64-bit words per character read (NFA)

    def __post_init__(self) -> None:
        if self.escape is not None and len(self.escape) != 1:
            raise SqlFilterError(f"ESCAPE takes one character, not {self.escape!r}")
        items = _items(self.pattern, self.escape)
        if ANY_ONE in items:
            matcher = _Nfa(items).match
            object.__setattr__(self, "words", len(items) // 64 + 1)
        elif ANY_RUN in items:
            matcher = _Segments(items).match
        else:
            literal = "".join(items)

            def matcher(value: str, work: Work | None = None) -> bool:
                if work is not None:
                    work.steps += min(len(value), len(literal))
                return value == literal

        object.__setattr__(self, "_match", matcher)

    def matches(self, value: str, work: Work | None = None) -> bool:
        return self._match(value, work)


class _Segments:
    """A pattern of literal segments separated by `%`."""

    __slots__ = ("head", "tail", "middle", "least")

    def __init__(self, items: list[Any]) -> None:
        segments, current = [], []
        for item in items:
            if item is ANY_RUN:
                segments.append("".join(current))
                current = []
            else:
                current.append(item)
        segments.append("".join(current))
        self.head, self.tail, self.middle = segments[0], segments[-1], segments[1:-1]
        self.least = sum(map(len, segments))  # the shortest value that can match

    def match(self, value: str, work: Work | None = None) -> bool:
        if len(value) < self.least or not value.startswith(self.head) or not value.endswith(self.tail):
            return False
        pos, end = len(self.head), len(value) - len(self.tail)
        for segment in self.middle:  # never empty: runs of % were collapsed
            found = value.find(segment, pos, end)
            if work is not None:  # this search read value[pos : found + len(segment)] (or to end)
                work.steps += (end if found < 0 else found + len(segment)) - pos
            if found < 0:
                return False
            pos = found + len(segment)
        return True


class _Nfa:
    """Shift-and over the pattern's items; state i = the first i items matched."""

    __slots__ = ("advance", "any_one", "loops", "before_run", "start", "accept")

    def __init__(self, items: list[Any]) -> None:
        self.advance: dict[str, int] = {}  # character -> states that may advance on it
        any_one = loops = before_run = 0
        for i, item in enumerate(items):
            bit = 1 << i
            if item is ANY_RUN:
                before_run |= bit  # state i goes to i + 1 without reading (% matches nothing too)
                loops |= bit << 1  # and state i + 1 reads any character and stays
            elif item is ANY_ONE:
                any_one |= bit
            else:
                self.advance[item] = self.advance.get(item, 0) | bit
        self.any_one, self.loops, self.before_run = any_one, loops, before_run
        for c in self.advance:
            self.advance[c] |= any_one
        self.start = 1 | ((1 & before_run) << 1)
        self.accept = 1 << len(items)

    def match(self, value: str, work: Work | None = None) -> bool:
        states, advance, any_one, loops, before_run = (
            self.start,
            self.advance,
            self.any_one,
            self.loops,
            self.before_run,
        )
        read = 0
        for c in value:
            states = ((states & advance.get(c, any_one)) << 1) | (states & loops)
            states |= (states & before_run) << 1
            read += 1
            if not states:
                break
        if work is not None:
            work.steps += read
        return bool(states & self.accept)
