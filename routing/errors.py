"""Errors of the routing layer, each carrying its AMQP condition.

They derive from SessionError because that is what RabbitMQ does when an
ATTACH names a malformed or absent address: it ends the session with the
condition (invalid-field, not-found). Other callers (the anonymous-relay path,
the /management node) catch them and map the condition themselves: rejected
outcome, DETACH, or an HTTP-like status (400, 403, 404, 409).
"""

from __future__ import annotations

from amqp.errors import Condition, SessionError


class RoutingError(SessionError):
    """Base of every error raised by routing."""

    condition_code = Condition.INTERNAL_ERROR

    def __init__(self, description: str | None = None):
        super().__init__(self.condition_code, description)


class AddressError(RoutingError):
    """A source or target address that is not a valid v2 address."""

    condition_code = Condition.INVALID_FIELD


class InvalidArgument(RoutingError):
    """A declaration with a bad field (unknown exchange type, bad argument)."""

    condition_code = Condition.INVALID_FIELD


class NotFound(RoutingError):
    """A named exchange or queue does not exist in the vhost."""

    condition_code = Condition.NOT_FOUND


class PreconditionFailed(RoutingError):
    """Redeclaration with other properties, an invalid binding, if-unused."""

    condition_code = Condition.PRECONDITION_FAILED


class NotAllowed(RoutingError):
    """An operation on a built-in exchange (the default one or amq.*)."""

    condition_code = Condition.NOT_ALLOWED
