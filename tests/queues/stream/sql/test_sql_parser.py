"""Parsing SQL filter expressions: literals, names, precedence, and refusal
of anything the broker cannot apply, with the bounds on size and depth."""

from __future__ import annotations

import pytest

from queues.stream.sql import SqlFilterError
from queues.stream.sql.like import LikePattern
from queues.stream.sql.nodes import And, Arithmetic, Compare, Field, In, IsNull, Like, Literal, Not, Or, Unary, Utc
from queues.stream.sql.parser import MAX_HEIGHT, MAX_NESTING, parse

A = Field("application_properties", "a")
B = Field("application_properties", "b")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("25", 25),
        ("-5.5", -5.5),
        ("1.23E6", 1.23e6),
        ("1e3", 1000.0),
        (".5", 0.5),
        ("5.", 5.0),
        ("18446744073709551615", (1 << 64) - 1),
        ("'It''s'", "It's"),
        ('"say ""hi"""', 'say "hi"'),
        ("'😎☀️'", "😎☀️"),
        ("''", ""),
        ("0x426F62", b"Bob"),
        ("TRUE", True),
        ("FALSE", False),
    ],
)
def test_literals(text, value):
    tree = parse(f"x = {text}")
    assert tree == Compare("=", Field("application_properties", "x"), Literal(value))
    assert type(tree.right.value) is type(value)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("header.priority", Field("header", "priority")),
        ("h.priority", Field("header", "priority")),
        ("properties.message_id", Field("properties", "message_id")),
        ("p.reply_to_group_id", Field("properties", "reply_to_group_id")),
        ("application_properties.color", Field("application_properties", "color")),
        ("a.color", Field("application_properties", "color")),
        ("color", Field("application_properties", "color")),
        ("[order-status]", Field("application_properties", "order-status")),
        ("[order status]", Field("application_properties", "order status")),
        ("[注文状況]", Field("application_properties", "注文状況")),
        ("[a]]b]", Field("application_properties", "a]b")),
        ("a.[x.y]", Field("application_properties", "x.y")),
        ("[AND]", Field("application_properties", "AND")),
        ("$x_1", Field("application_properties", "$x_1")),
    ],
)
def test_names(text, field):
    assert parse(f"{text} IS NULL") == IsNull(field)


def test_precedence():
    # AND binds tighter than OR, NOT tighter than AND, comparisons tighter than NOT, * tighter than +
    assert parse("a = 1 OR b = 2 AND NOT a = 3") == Or((
        Compare("=", A, Literal(1)), And((Compare("=", B, Literal(2)), Not(Compare("=", A, Literal(3))))),
    ))  # fmt: skip
    assert parse("a + b * 2 - 1 > 0") == Compare(">", Arithmetic("-", Arithmetic("+", A, Arithmetic("*", B, Literal(2))),
                                                               Literal(1)), Literal(0))  # fmt: skip
    assert parse("(a = 1 OR b = 2) AND a <> 3") == And((Or((Compare("=", A, Literal(1)), Compare("=", B, Literal(2)))),
                                                         Compare("<>", A, Literal(3))))  # fmt: skip
    assert parse("a != 1") == Compare("<>", A, Literal(1))
    assert parse("-a < +b") == Compare("<", Unary("-", A), Unary("+", B))
    assert parse("a % 3 = 0") == Compare("=", Arithmetic("%", A, Literal(3)), Literal(0))


def test_special_predicates():
    assert parse("a IS NOT NULL") == Not(IsNull(A))
    assert parse("a NOT IN ('x', 'y')") == Not(In(A, (Literal("x"), Literal("y"))))
    assert parse("a IN (1, b + 1)") == In(A, (Literal(1), Arithmetic("+", B, Literal(1))))
    assert parse(r"a NOT LIKE '\_%' ESCAPE '\'") == Not(Like(A, LikePattern(r"\_%", "\\")))
    assert parse("a > UTC() - 3600000") == Compare(">", A, Arithmetic("-", Utc(), Literal(3600000)))
    assert parse("NOT a") == Not(A)  # a boolean property as a condition


def test_chains_of_and_or_stay_flat():
    text = " OR ".join(f"a = {i}" for i in range(500))
    tree = parse(text, max_length=len(text))
    assert isinstance(tree, Or) and len(tree.operands) == 500


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("@#$%^&", "unexpected character '@'"),
        ("FALSE FALSE", "expected an operator or the end at 6"),
        ("a = ", "expected a value"),
        ("a = 'open", "unterminated string"),
        ("[open = 1", "unterminated delimited identifier"),
        ("a = 0x1", "even number of hex digits"),
        ("a = 1e", "exponent needs digits"),
        ("a = 12abc", "after a number"),
        ("a = 18446744073709551616", "out of range"),
        ("a = NULL", "IS NULL"),
        ("a IS 1", "expected NULL"),
        ("a NOT b", "LIKE or IN after NOT"),
        ("a LIKE b", "string pattern"),
        ("a LIKE 'x' ESCAPE 'ab'", "one character"),
        ("a LIKE 'x!' ESCAPE '!'", "ends with its escape"),
        ("a IN ()", "expected a value"),
        ("a IN ('x' 'y')", ", or )"),
        ("(a = 1", "expected )"),
        ("a = 1)", "expected an operator or the end"),
        ("a = 1 = 2", "expected an operator or the end"),
        ("a = 1 and b = 2", "expected an operator or the end"),  # reserved words are upper case only
        ("LOWER(a) = 'x'", "unknown function LOWER()"),
        ("utc() > 1", "unknown function utc()"),
        ("p.subject() = 1", "unknown function p.subject()"),
        ("m.x = 1", "section 'm' at 0 is not supported"),
        ("footer.x = 1", "section 'footer' at 0 is not supported"),
        ("order.status = 1", "section 'order' at 0 is unknown"),
        ("p.colour = 'red'", "no such field in properties"),
        ("p.group-id = 'g'", "no such field in properties"),  # fields are written with underscores
        ("header.durable = TRUE", "no such field in header"),
        ("a.b.c = 1", "at most one qualifier"),
        ("p. = 1", "a name must follow"),
    ],
)
def test_errors(text, error):
    with pytest.raises(SqlFilterError, match=error.replace("(", r"\(").replace(")", r"\)")):
        parse(text)


def test_length_bound():
    text = "a = '" + "x" * 4090 + "'"
    assert len(text) == 4096
    parse(text)
    with pytest.raises(SqlFilterError, match="4097 characters, more than the 4096 allowed"):
        parse(text + " ")
    with pytest.raises(SqlFilterError, match="more than the 10 allowed"):
        parse("a = 'abcdefgh'", max_length=10)


def test_nesting_bound():
    deepest = "(" * MAX_NESTING + "a = 1" + ")" * MAX_NESTING
    assert parse(deepest) == Compare("=", A, Literal(1))
    for text in ["(" * (MAX_NESTING + 1) + "a = 1" + ")" * (MAX_NESTING + 1), "NOT " * (MAX_NESTING + 1) + "a",
                 "a = " + "-" * (MAX_NESTING + 1) + "b", "(" * 10_000]:  # fmt: skip
        with pytest.raises(SqlFilterError, match="nested"):
            parse(text, max_length=len(text))


def test_height_bound():
    """a + a + ... nests one level per term without recursion in the parser; evaluation would recurse."""
    ok = " + ".join(["a"] * (MAX_HEIGHT - 1)) + " > 0"
    parse(ok)
    too_deep = " + ".join(["a"] * MAX_HEIGHT) + " > 0"
    with pytest.raises(SqlFilterError, match=f"more than {MAX_HEIGHT} levels"):
        parse(too_deep)


def test_not_a_string():
    with pytest.raises(SqlFilterError, match="must be a string"):
        parse(b"a = 1")  # type: ignore[arg-type]
