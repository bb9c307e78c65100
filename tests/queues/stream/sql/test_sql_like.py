"""LIKE patterns: the same answers as a plain dynamic-programming matcher
on random patterns, and work bounded by the value's length on the patterns
that make backtracking matchers (regular expressions) take exponential time."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queues.stream.sql import SqlFilterError
from queues.stream.sql.like import LikePattern, Work


def reference(value: str, pattern: str, escape: str | None) -> bool:
    """dp[j] = value[:i] matches the first j pattern items, row by row: O(len(value) x len(pattern))."""
    items, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == escape:
            items.append(("char", pattern[i + 1]))
            i += 2
            continue
        items.append(("any",) if c == "%" else ("one",) if c == "_" else ("char", c))
        i += 1
    row = [True] + [False] * len(items)
    for j, item in enumerate(items):  # the empty value matches leading %s
        row[j + 1] = row[j] and item[0] == "any"
    for ch in value:
        new = [False] * (len(items) + 1)
        for j, item in enumerate(items):
            if item[0] == "any":
                new[j + 1] = new[j] or row[j + 1]
            elif item[0] == "one" or item[1] == ch:
                new[j + 1] = row[j]
        row = new
    return row[-1]


patterns = st.text(alphabet="ab%_!", max_size=10).filter(lambda p: not p.endswith("!") or p.endswith("!!"))


@settings(max_examples=1500, deadline=None)
@given(st.text(alphabet="ab%_!", max_size=12), patterns, st.booleans())
def test_matches_like_the_reference(value, pattern, with_escape):
    escape = "!" if with_escape else None
    try:
        compiled = LikePattern(pattern, escape)
    except SqlFilterError:  # only a pattern ending in a lone escape character
        assert with_escape and _ends_with_lone_escape(pattern)
        return
    work = Work()
    assert compiled.matches(value, work) == reference(value, pattern, escape)
    assert work.steps <= len(value)  # each character of the value is read at most once


def _ends_with_lone_escape(pattern: str) -> bool:
    i = 0
    while i < len(pattern):
        if pattern[i] == "!":
            if i + 1 == len(pattern):
                return True
            i += 2
        else:
            i += 1
    return False


@pytest.mark.parametrize(
    ("pattern", "escape", "value", "expected"),
    [
        ("John%", None, "Johnny", True),
        ("John%", None, "Jon", False),
        ("%@example.com", None, "a@example.com", True),
        ("John % Doe", None, "John F. Doe", True),
        ("___ABC", None, "123ABC", True),
        ("___ABC", None, "12ABC", False),
        (r"\_%", "\\", "_foo", True),
        (r"\_%", "\\", "bar", False),
        ("100!%", "!", "100%", True),
        ("100!%", "!", "1000", False),
        ("a!!b", "!", "a!b", True),
        ("%", None, "", True),
        ("_", None, "", False),
        ("😎_", None, "😎☀", True),  # _ is one character (a code point), not one byte
        ("ab%b", None, "ab", False),  # prefix and suffix may not overlap
        ("ab%b", None, "abb", True),
    ],
)
def test_examples(pattern, escape, value, expected):
    assert LikePattern(pattern, escape).matches(value) is expected


def test_escape_must_be_one_character():
    with pytest.raises(SqlFilterError, match="one character"):
        LikePattern("a", "!!")


def backtracking_steps(value: str, pattern: str, budget: int) -> int:
    """What a naive recursive matcher (the shape of a backtracking regex) does, counted, up to a budget."""
    steps = 0

    def match(i: int, j: int) -> bool:
        nonlocal steps
        steps += 1
        if steps > budget:
            raise OverflowError
        if j == len(pattern):
            return i == len(value)
        if pattern[j] == "%":
            return any(match(k, j + 1) for k in range(i, len(value) + 1))
        return i < len(value) and pattern[j] in ("_", value[i]) and match(i + 1, j + 1)

    try:
        match(0, 0)
    except OverflowError:
        pass
    return steps


@pytest.mark.parametrize("n", [1_000, 4_000, 16_000])
@pytest.mark.parametrize("shape", ["%a%a%a%a%a%a%a%a%a%a%b", "%a_a%a_a%a_a%a_a%b", "%" + "a%" * 1_000 + "b"])
def test_adversarial_patterns_take_at_most_one_step_per_character(shape, n):
    value = "a" * n
    pattern = LikePattern(shape)
    work = Work()
    assert not pattern.matches(value, work)
    assert work.steps <= n
    # and matching a pattern that does occur reads no more either
    work = Work()
    assert pattern.matches(value + "b", work) and work.steps <= n + 1


def test_the_step_count_would_catch_a_backtracking_matcher():
    """The same shape on 30 characters already costs a backtracking matcher
    more than a million steps (it grows as n^k), ours 30."""
    value, shape = "a" * 30, "%a%a%a%a%a%b"
    assert backtracking_steps(value, shape, budget=1_000_000) > 1_000_000
    work = Work()
    LikePattern(shape).matches(value, work)
    assert work.steps <= 30
