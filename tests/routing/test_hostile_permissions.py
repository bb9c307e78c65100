"""Issue 14, row 7: permission patterns are matched in linear time (RE2).
A backtracking matcher took 2.6 s for `(a+)+$` against a 25-character queue
name, doubling per character; the patterns people write behave as before."""

from __future__ import annotations

import re

import pytest

from routing.permissions import AccessRefused, Permission, check, validate_pattern


@pytest.mark.timeout(30)  # a backtracking matcher would need ~2^40 steps here
def test_a_catastrophic_pattern_is_answered():
    permission = Permission(configure="(a+)+$", write="(a+)+$", read="(a+)+$")
    for kind in ("configure", "write", "read"):
        with pytest.raises(AccessRefused):
            check(permission, "u", "/", kind, "a" * 40 + "!", "queue")
    check(permission, "u", "/", "read", "a" * 40, "queue")  # matches: no exception


USUAL = [".*", "^amq\\.gen.*", "^$", "", "^(orders|billing)\\..*", "^my-.*-queue$", "q[0-9]+", "^amq\\.default$",
         "^$|^amq\\.gen.*", "(?i)^ADMIN", "^[^.]*$"]  # fmt: skip
NAMES = ["", "amq.gen-abc", "amq.default", "orders.new", "billing", "my-app-queue", "q12", "admin-stuff",
         "ADMIN", "with.dot", "é-unicode", "line\nbreak"]  # fmt: skip


@pytest.mark.parametrize("pattern", USUAL)
def test_usual_patterns_behave_as_with_the_standard_library(pattern):
    permission = Permission(pattern, pattern, pattern)
    for name in NAMES:
        resource = name or "amq.default"  # the default exchange is checked by that name
        expected = bool(pattern) and re.search(pattern, resource) is not None
        try:
            check(permission, "u", "/", "write", name, "exchange")
            allowed = True
        except AccessRefused:
            allowed = False
        assert allowed == expected, (pattern, name)


@pytest.mark.parametrize("pattern", ["(a)\\1", "(?=a)b", "(?<!x)y", "[", "(unclosed"])
def test_patterns_that_cannot_match_in_linear_time_are_refused(pattern):
    with pytest.raises(ValueError, match="invalid permission pattern"):
        validate_pattern(pattern)


def test_a_stored_unsupported_pattern_grants_nothing():
    with pytest.raises(AccessRefused):
        check(Permission(configure="(a)\\1|.*"), "u", "/", "configure", "anything", "queue")
