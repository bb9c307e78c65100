"""A session's links by handle, ours and the peer's [2.6.2]: handles given
out below handle-max, a peer's ATTACH paired with ours (or a new link made
for it), and a link forgotten once both DETACHes passed.

Apart from `Session` (amqp/session.py) because it is the links' lifecycle,
not the session's flow: the session asks it for a link by handle and hands
it ATTACH and DETACH frames. `Session.links` and `Session.remote_links` are
this table's two dicts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .definitions import SENDER
from .errors import AMQPError, Condition, LocalProtocolError, SessionError
from .events import LinkAttached, LinkDetached
from .link import Link

if TYPE_CHECKING:
    from .session import Session


def remote_link(remote_links: dict[int, Link], handle: int) -> Link:
    """The link the peer attached on `handle`; a frame naming another is a session error [2.6.2]."""
    link = remote_links.get(handle)
    if link is None:
        raise SessionError(Condition.UNATTACHED_HANDLE, f"no link attached on handle {handle}")
    return link


class SessionLinks:
    """The link table of one session (see the module docstring)."""

    def __init__(self, session: Session):
        self.session = session
        self.by_handle: dict[int, Link] = {}  # by our handle
        self.by_remote_handle: dict[int, Link] = {}  # by the peer's handle

    def create(self, name: str, role: bool) -> Link:
        """A link we initiate."""
        link = Link(self.session, name, self.free_handle(), role)
        self.by_handle[link.handle] = link
        return link

    def free_handle(self) -> int:
        handle = 0
        while handle in self.by_handle:
            handle += 1
        session = self.session
        if handle > min(session.handle_max, session.remote_handle_max):
            raise LocalProtocolError("no free link handle below handle-max")
        return handle

    def on_attach(self, a: Any) -> list:
        handle_max = self.session.handle_max
        if a.handle > handle_max:
            raise AMQPError(Condition.FRAMING_ERROR, f"link handle {a.handle} exceeds handle-max {handle_max}")
        if a.handle in self.by_remote_handle:
            raise SessionError(Condition.HANDLE_IN_USE, f"handle {a.handle} is already in use")
        link = None
        for candidate in self.by_handle.values():
            if candidate.name == a.name and candidate.attach_sent and not candidate.attach_received:
                link = candidate
                break
        if link is None:
            link = self.create(a.name, not a.role)
            link.snd_settle_mode, link.rcv_settle_mode = a.snd_settle_mode, a.rcv_settle_mode
        elif link.role == a.role:
            raise SessionError(Condition.NOT_ALLOWED, f"both ends of link {a.name!r} have the same role")
        link.on_attach(a)
        self.by_remote_handle[a.handle] = link
        if a.role == SENDER and a.initial_delivery_count is None:
            link.refuse(Condition.INVALID_FIELD, "a sender's attach must carry initial-delivery-count")
            return []
        if link.detach_sent:  # we refused before the reply came
            self.forget_if_done(link)
            return []
        return [LinkAttached(link, a)]

    def on_detach(self, d: Any) -> list:
        link = remote_link(self.by_remote_handle, d.handle)
        link.detach_received = True
        unsettled = [] if link.detach_sent else link.detach(closed=d.closed)
        self.forget_if_done(link)
        return [LinkDetached(link, d.error, d.closed, True, unsettled)]

    def forget_if_done(self, link: Link) -> None:
        if link.detach_sent and (link.detach_received or not link.attach_received):
            self.by_handle.pop(link.handle, None)
            if link.remote_handle is not None and self.by_remote_handle.get(link.remote_handle) is link:
                del self.by_remote_handle[link.remote_handle]
