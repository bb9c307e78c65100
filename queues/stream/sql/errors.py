"""The one error an SQL filter expression raises: it cannot be applied
(syntax, size, an unknown function or field). The attach refuses the link
with amqp:invalid-field and this text."""

from __future__ import annotations

__all__ = ["SqlFilterError"]


class SqlFilterError(ValueError):
    pass
