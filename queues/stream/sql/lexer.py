"""Tokens of an SQL filter expression (AMQP Filter Expressions 1.0 §6, the
subset RabbitMQ 4.2 accepts for streams).

One left-to-right pass, each character looked at a bounded number of times:
no regular expressions, no backtracking. Reserved words count only in upper
case (`AND`, not `and`, as RabbitMQ 4.2); anything else that looks like a
word is an identifier. Identifiers may carry one qualifier, `p.subject`;
`[any text]` is a delimited identifier (`]]` stands for `]`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from queues.stream.sql.errors import SqlFilterError

__all__ = ["KEYWORDS", "Token", "tokenize"]

KEYWORDS = frozenset(("AND", "OR", "NOT", "IN", "IS", "NULL", "LIKE", "ESCAPE", "TRUE", "FALSE"))
MAX_INTEGER = 1 << 64  # literals beyond AMQP's ulong / long range are refused, so no arithmetic grows without bound
WHITESPACE = " \t\n\r\f"
OPERATORS = ("<>", "!=", "<=", ">=", "=", "<", ">", "+", "-", "*", "/", "%", "(", ")", ",")


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # number | string | binary | name | keyword | op | end
    value: Any  # the number, text or bytes; a name is (qualifier or None, name); keywords and ops their text
    pos: int  # where it starts in the expression, for error messages


def _word_start(c: str) -> bool:
    return c.isalpha() or c in "_$"


def _word_part(c: str) -> bool:
    return c.isalnum() or c in "_$"


def tokenize(text: str) -> list[Token]:
    """Raises SqlFilterError naming the position of the first character it cannot read."""
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in WHITESPACE:
            i += 1
        elif c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
            i = _number(text, i, tokens)
        elif c in "'\"":
            value, i2 = _quoted(text, i, c, c)
            tokens.append(Token("string", value, i))
            i = i2
        elif c == "[":
            value, i2 = _quoted(text, i, "[", "]")
            tokens.append(Token("name", (None, value), i))
            i = i2
        elif _word_start(c):
            i = _word(text, i, tokens)
        else:
            op = next((o for o in OPERATORS if text.startswith(o, i)), None)
            if op is None:
                raise SqlFilterError(f"unexpected character {c!r} at {i}")
            tokens.append(Token("op", "<>" if op == "!=" else op, i))
            i += len(op)
    tokens.append(Token("end", None, n))
    return tokens


def _quoted(text: str, start: int, opening: str, closing: str) -> tuple[str, int]:
    """A string or delimited identifier; a doubled closing character stands for itself."""
    parts, i = [], start + 1
    while True:
        j = text.find(closing, i)
        if j < 0:
            what = "string" if opening != "[" else "delimited identifier"
            raise SqlFilterError(f"unterminated {what} starting at {start}")
        parts.append(text[i:j])
        if text.startswith(closing, j + 1):  # '' inside '...'
            parts.append(closing)
            i = j + 2
        else:
            return "".join(parts), j + 1


def _digits(text: str, i: int) -> int:
    while i < len(text) and text[i].isdigit():
        i += 1
    return i


def _number(text: str, start: int, tokens: list[Token]) -> int:
    n = len(text)
    if text.startswith(("0x", "0X"), start):
        i = start + 2
        while i < n and text[i] in "0123456789abcdefABCDEF":
            i += 1
        digits = text[start + 2 : i]
        if not digits or len(digits) % 2:
            raise SqlFilterError(f"a binary constant needs an even number of hex digits, at {start}")
        return _end_of_literal(text, i, tokens, Token("binary", bytes.fromhex(digits), start))
    i = _digits(text, start)
    approximate = False
    if i < n and text[i] == ".":
        approximate = True
        i = _digits(text, i + 1)
    if i < n and text[i] in "eE":
        j = i + 1
        if j < n and text[j] in "+-":
            j += 1
        k = _digits(text, j)
        if k == j:
            raise SqlFilterError(f"an exponent needs digits, at {i}")
        approximate, i = True, k
    literal = text[start:i]
    if approximate:
        return _end_of_literal(text, i, tokens, Token("number", float(literal), start))
    value = int(literal)
    if value >= MAX_INTEGER:
        raise SqlFilterError(f"integer {literal[:20]}... at {start} is out of range (at most 64 bits)")
    return _end_of_literal(text, i, tokens, Token("number", value, start))


def _end_of_literal(text: str, i: int, tokens: list[Token], token: Token) -> int:
    if i < len(text) and (_word_part(text[i]) or text[i] == "."):
        raise SqlFilterError(f"unexpected character {text[i]!r} after a number at {i}")
    tokens.append(token)
    return i


def _word(text: str, start: int, tokens: list[Token]) -> int:
    i = start + 1
    while i < len(text) and _word_part(text[i]):
        i += 1
    word = text[start:i]
    if i < len(text) and text[i] == ".":  # a qualified name: section.field
        j = i + 1
        if j < len(text) and text[j] == "[":
            name, k = _quoted(text, j, "[", "]")
        elif j < len(text) and _word_start(text[j]):
            k = j + 1
            while k < len(text) and _word_part(text[k]):
                k += 1
            name = text[j:k]
        else:
            raise SqlFilterError(f"a name must follow {word}. at {j}")
        if k < len(text) and text[k] == ".":
            raise SqlFilterError(f"a name has at most one qualifier, at {k}")
        tokens.append(Token("name", (word, name), start))
        return k
    if word in KEYWORDS:
        tokens.append(Token("keyword", word, start))
    else:
        tokens.append(Token("name", (None, word), start))
    return i
