"""Protocol errors carry their AMQP condition; only the engine boundary turns
them into CLOSE, END or DETACH frames (STYLE.md, rule 2)."""

from __future__ import annotations


class Condition:
    """Error conditions of [2.8.15], [2.8.16], [2.8.17] and [2.8.18]."""

    INTERNAL_ERROR = "amqp:internal-error"
    NOT_FOUND = "amqp:not-found"
    UNAUTHORIZED_ACCESS = "amqp:unauthorized-access"
    DECODE_ERROR = "amqp:decode-error"
    RESOURCE_LIMIT_EXCEEDED = "amqp:resource-limit-exceeded"
    NOT_ALLOWED = "amqp:not-allowed"
    INVALID_FIELD = "amqp:invalid-field"
    NOT_IMPLEMENTED = "amqp:not-implemented"
    RESOURCE_LOCKED = "amqp:resource-locked"
    PRECONDITION_FAILED = "amqp:precondition-failed"
    RESOURCE_DELETED = "amqp:resource-deleted"
    ILLEGAL_STATE = "amqp:illegal-state"
    FRAME_SIZE_TOO_SMALL = "amqp:frame-size-too-small"
    CONNECTION_FORCED = "amqp:connection:forced"
    FRAMING_ERROR = "amqp:connection:framing-error"
    REDIRECT = "amqp:connection:redirect"
    WINDOW_VIOLATION = "amqp:session:window-violation"
    ERRANT_LINK = "amqp:session:errant-link"
    HANDLE_IN_USE = "amqp:session:handle-in-use"
    UNATTACHED_HANDLE = "amqp:session:unattached-handle"
    DETACH_FORCED = "amqp:link:detach-forced"
    TRANSFER_LIMIT_EXCEEDED = "amqp:link:transfer-limit-exceeded"
    MESSAGE_SIZE_EXCEEDED = "amqp:link:message-size-exceeded"
    LINK_REDIRECT = "amqp:link:redirect"
    STOLEN = "amqp:link:stolen"


class AMQPError(Exception):
    """A protocol violation or refusal with its AMQP error condition."""

    scope = "connection"

    def __init__(self, condition: str, description: str | None = None):
        super().__init__(f"{condition}: {description}" if description else condition)
        self.condition = condition
        self.description = description


class DecodeError(AMQPError):
    """Bytes that are not valid AMQP type encodings [1.6]."""

    def __init__(self, description: str):
        super().__init__(Condition.DECODE_ERROR, description)


class FramingError(AMQPError):
    def __init__(self, description: str):
        super().__init__(Condition.FRAMING_ERROR, description)


class SessionError(AMQPError):
    """Ends the session [2.7.7], leaves the connection open."""

    scope = "session"


class LinkError(AMQPError):
    """Detaches the link [2.7.6] with closed=true, leaves the session open."""

    scope = "link"


class LocalProtocolError(Exception):
    """The application asked the engine for a move the protocol forbids (a bug
    in the caller, never triggered by peer input)."""
