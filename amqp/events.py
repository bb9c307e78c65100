"""What the engine tells its application: one small record per happening.

`Connection.receive_data()` returns a list of these. The engine has already
done what the protocol requires on its own (window and credit accounting,
replies to END, DETACH and CLOSE); the application decides the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True, eq=False)
class Delivery:
    """One message on a link, in either direction [2.6.12]."""

    id: int
    tag: bytes
    link: Any
    settled: bool
    payload: bytes = b""
    message_format: int = 0
    state: Any = None  # the latest delivery state, ours or the peer's
    remote_settled: bool = False


@dataclass(slots=True)
class SaslInitReceived:
    mechanism: str
    initial_response: bytes | None
    hostname: str | None


@dataclass(slots=True)
class SaslMechanismsReceived:
    mechanisms: list[str]


@dataclass(slots=True)
class SaslOutcomeReceived:
    code: int


@dataclass(slots=True)
class ConnectionOpened:
    """The peer's OPEN arrived."""

    open: Any


@dataclass(slots=True)
class ConnectionClosed:
    """The connection is over: the peer closed it, or we closed it with
    `error` after a protocol violation. The transport may be closed once
    `data_to_send()` is flushed."""

    error: Any = None
    remote: bool = True


@dataclass(slots=True)
class SessionBegun:
    session: Any
    begin: Any


@dataclass(slots=True)
class SessionEnded:
    session: Any
    error: Any = None
    remote: bool = True


@dataclass(slots=True)
class LinkAttached:
    link: Any
    attach: Any


@dataclass(slots=True)
class LinkDetached:
    """The link is gone. `unsettled` lists deliveries we sent on it that
    the peer never settled (a broker requeues them)."""

    link: Any
    error: Any = None
    closed: bool = True
    remote: bool = True
    unsettled: list[Delivery] = field(default_factory=list)


@dataclass(slots=True)
class LinkFlow:
    """The peer updated a link's flow state (credit, drain, echo)."""

    link: Any
    drain: bool
    echo: bool


@dataclass(slots=True)
class MessageReceived:
    link: Any
    delivery: Delivery


@dataclass(slots=True)
class DeliveryAborted:
    link: Any
    delivery: Delivery


@dataclass(slots=True)
class DeliveriesUpdated:
    """The peer's DISPOSITION changed these deliveries, in delivery-id order."""

    session: Any
    deliveries: list[Delivery]
