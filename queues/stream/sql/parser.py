"""SQL filter expression -> tree (nodes.py), by recursive descent.

Grammar, loosest binding first (the precedence of JMS message selectors,
on which AMQP Filter Expressions §6 builds):

    or         := and (OR and)*
    and        := not (AND not)*
    not        := NOT not | predicate
    predicate  := sum [ (= | <> | != | < | > | <= | >=) sum
                      | IS [NOT] NULL
                      | [NOT] LIKE 'pattern' [ESCAPE 'c']
                      | [NOT] IN ( sum (, sum)* ) ]
    sum        := product ((+ | -) product)*
    product    := sign ((* | / | %) sign)*
    sign       := (+ | -) sign | primary
    primary    := number | 'string' | "string" | 0xHEX | TRUE | FALSE
                | name | section.name | [delimited name] | UTC() | ( or )

Bounded on purpose: the expression's length (checked before tokenizing),
the nesting of parentheses, NOT and signs (MAX_NESTING, so the parser's own
recursion is bounded), and the height of the finished tree (MAX_HEIGHT:
`a + b + c + ...` nests without recursing here, but evaluation recurses per
level). AND and OR chains become one node each, so long lists of
alternatives stay flat.
"""

from __future__ import annotations

from queues.stream.sql.errors import SqlFilterError
from queues.stream.sql.lexer import Token, tokenize
from queues.stream.sql.like import LikePattern
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

__all__ = ["DEFAULT_MAX_LENGTH", "MAX_HEIGHT", "MAX_NESTING", "children", "parse"]

DEFAULT_MAX_LENGTH = 4096  # characters, as RabbitMQ 4.2 (the setting stream_sql_filter_max_length)
MAX_NESTING = 32  # parentheses, NOT and signs inside one another
MAX_HEIGHT = 100  # levels of the tree
COMPARISONS = frozenset(("=", "<>", "<", ">", "<=", ">="))

# [section qualifier] -> (section, {field as written -> attribute}); header: priority only (as RabbitMQ 4.2)
_PROPERTY_FIELDS = ("message_id", "user_id", "to", "subject", "reply_to", "correlation_id", "content_type",
                    "content_encoding", "absolute_expiry_time", "creation_time", "group_id", "group_sequence",
                    "reply_to_group_id")  # fmt: skip
SECTIONS = {
    "header": "header", "h": "header",
    "properties": "properties", "p": "properties",
    "application_properties": "application_properties", "a": "application_properties",
}  # fmt: skip
FIELDS = {"header": frozenset(("priority",)), "properties": frozenset(_PROPERTY_FIELDS)}
UNSUPPORTED_SECTIONS = frozenset(("delivery_annotations", "d", "message_annotations", "m", "footer", "f"))


def parse(text: str, max_length: int = DEFAULT_MAX_LENGTH) -> Node:
    """Raises SqlFilterError for anything it cannot apply."""
    if not isinstance(text, str):
        raise SqlFilterError(f"the expression must be a string, not {type(text).__name__}")
    if len(text) > max_length:
        raise SqlFilterError(f"the expression has {len(text)} characters, more than the {max_length} allowed")
    tree = _Parser(tokenize(text)).expression()
    _check_height(tree)
    return tree


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.at = 0
        self.nesting = 0

    # -- tokens ------------------------------------------------------------------------

    @property
    def token(self) -> Token:
        return self.tokens[self.at]

    def _is(self, kind: str, value: object = None) -> bool:
        t = self.tokens[self.at]
        return t.kind == kind and (value is None or t.value == value)

    def _take(self, kind: str, value: object = None) -> Token | None:
        if self._is(kind, value):
            self.at += 1
            return self.tokens[self.at - 1]
        return None

    def _expect(self, kind: str, value: object, what: str) -> Token:
        t = self._take(kind, value)
        if t is None:
            raise self._unexpected(what)
        return t

    def _unexpected(self, expected: str) -> SqlFilterError:
        t = self.token
        found = "the end" if t.kind == "end" else repr(t.value if t.kind != "name" else t.value[1])
        return SqlFilterError(f"expected {expected} at {t.pos}, found {found}")

    def _nest(self) -> None:
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise SqlFilterError(f"more than {MAX_NESTING} nested parentheses, NOT or signs at {self.token.pos}")

    # -- grammar -----------------------------------------------------------------------

    def expression(self) -> Node:
        if self._is("end"):
            raise SqlFilterError("the expression is empty")
        node = self._or()
        if not self._is("end"):
            raise self._unexpected("an operator or the end")
        return node

    def _or(self) -> Node:
        operands = [self._and()]
        while self._take("keyword", "OR"):
            operands.append(self._and())
        return operands[0] if len(operands) == 1 else Or(tuple(operands))

    def _and(self) -> Node:
        operands = [self._not()]
        while self._take("keyword", "AND"):
            operands.append(self._not())
        return operands[0] if len(operands) == 1 else And(tuple(operands))

    def _not(self) -> Node:
        if self._take("keyword", "NOT"):
            self._nest()
            node = Not(self._not())
            self.nesting -= 1
            return node
        return self._predicate()

    def _predicate(self) -> Node:
        left = self._sum()
        t = self.token
        if t.kind == "op" and t.value in COMPARISONS:
            self.at += 1
            return Compare(t.value, left, self._sum())
        if self._take("keyword", "IS"):
            negated = self._take("keyword", "NOT") is not None
            self._expect("keyword", "NULL", "NULL")
            return Not(IsNull(left)) if negated else IsNull(left)
        negated = self._take("keyword", "NOT") is not None
        if self._take("keyword", "LIKE"):
            node: Node = Like(left, self._pattern())
        elif self._take("keyword", "IN"):
            node = In(left, self._list())
        elif negated:
            raise self._unexpected("LIKE or IN after NOT")
        else:
            return left
        return Not(node) if negated else node

    def _pattern(self) -> LikePattern:
        pattern = self._expect("string", None, "a string pattern after LIKE").value
        escape = None
        if self._take("keyword", "ESCAPE"):
            escape = self._expect("string", None, "a one-character string after ESCAPE").value
        return LikePattern(pattern, escape)

    def _list(self) -> tuple[Node, ...]:
        self._expect("op", "(", "( after IN")
        values = [self._sum()]
        while self._take("op", ","):
            values.append(self._sum())
        self._expect("op", ")", ", or ) in the IN list")
        return tuple(values)

    def _sum(self) -> Node:
        node = self._product()
        while self.token.kind == "op" and self.token.value in ("+", "-"):
            op = self.tokens[self.at].value
            self.at += 1
            node = Arithmetic(op, node, self._product())
        return node

    def _product(self) -> Node:
        node = self._sign()
        while self.token.kind == "op" and self.token.value in ("*", "/", "%"):
            op = self.tokens[self.at].value
            self.at += 1
            node = Arithmetic(op, node, self._sign())
        return node

    def _sign(self) -> Node:
        t = self.token
        if t.kind == "op" and t.value in ("+", "-"):
            self.at += 1
            self._nest()
            operand = self._sign()
            self.nesting -= 1
            if isinstance(operand, Literal) and type(operand.value) in (int, float):
                return Literal(-operand.value if t.value == "-" else operand.value)  # a signed constant
            return Unary(t.value, operand)
        return self._primary()

    def _primary(self) -> Node:
        t = self.token
        if t.kind in ("number", "string", "binary"):
            self.at += 1
            return Literal(t.value)
        if t.kind == "keyword" and t.value in ("TRUE", "FALSE"):
            self.at += 1
            return Literal(t.value == "TRUE")
        if t.kind == "name":
            self.at += 1
            if self._is("op", "("):
                return self._call(t)
            return _field(t)
        if self._take("op", "("):
            self._nest()
            node = self._or()
            self.nesting -= 1
            self._expect("op", ")", ")")
            return node
        if t.kind == "keyword" and t.value == "NULL":
            raise SqlFilterError(f"NULL at {t.pos}: compare with IS NULL or IS NOT NULL")
        raise self._unexpected("a value, a name or (")

    def _call(self, name: Token) -> Node:
        qualifier, function = name.value
        if qualifier is not None or function != "UTC":
            shown = function if qualifier is None else f"{qualifier}.{function}"
            raise SqlFilterError(f"unknown function {shown}() at {name.pos} (only UTC() is supported)")
        self._expect("op", "(", "(")
        self._expect("op", ")", ") after UTC(")
        return Utc()


def _field(t: Token) -> Field:
    qualifier, name = t.value
    if qualifier is None:
        return Field("application_properties", name)  # unqualified names are application properties
    section = SECTIONS.get(qualifier)
    if section is None:
        why = "is not supported" if qualifier in UNSUPPORTED_SECTIONS else "is unknown"
        raise SqlFilterError(f"section {qualifier!r} at {t.pos} {why} (header, properties, application_properties)")
    known = FIELDS.get(section)
    if known is not None and name not in known:
        raise SqlFilterError(f"{qualifier}.{name} at {t.pos}: no such field in {section} (one of {sorted(known)})")
    return Field(section, name)


def _check_height(tree: Node) -> None:
    """Without recursion: the tree may be as deep as the expression is long."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_HEIGHT:
            raise SqlFilterError(f"the expression nests more than {MAX_HEIGHT} levels deep")
        stack.extend((child, depth + 1) for child in children(node))


def children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, (And, Or)):
        return node.operands
    if isinstance(node, (Arithmetic, Compare)):
        return (node.left, node.right)
    if isinstance(node, In):
        return (node.operand, *node.values)
    if isinstance(node, (Not, IsNull, Like, Unary)):
        return (node.operand,)
    return ()
