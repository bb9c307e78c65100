"""Publishing into one queue of this node without a connection: the destination of a
`local` shovel (node/shovel/runner.py), which would otherwise dial this node's own AMQP
listener and make the node encode, send, read and decode every copy twice over.

What a client's link to /queues/NAME is checked for, a `DirectPublisher` is checked for
when opened (`open_direct`): the login (the shovel URI's user and password, or SASL
ANONYMOUS's user; from this host, so loopback-only users may), access to the vhost, write
on the default exchange ("amq.default"), the queue existing. Each message then goes as a
client's would (node/client/links.py's `enqueue`, x-cc included) and is answered with the
same outcome (its `Confirm`: accepted once every queue stored it; rejected for a full queue
or disk; released for a queue deleted under it, or whose node was lost with it in flight).
A message over max_message_size is rejected with amqp:link:message-size-exceeded. Once the
queue is deleted the publisher ends (`on_end`) instead of refusing what follows: a shovel
then leaves its in-flight messages at their source and tries again later.

Flow: at most max_unconfirmed messages unconfirmed, and none while a resource alarm is raised or
a quorum queue holds its publishers (queues/quorum/publish_hold.py), as a client's credit
would be; `on_credit` is called when sending may go on. A token's login ends the publisher
when the token expires (`on_end` too), as it ends a connection.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from amqp.errors import Condition
from amqp.message import Message
from node.client.links import RELEASED, Confirm, carbon_copy_keys, enqueue, rejected
from routing.errors import RoutingError
from routing.permissions import check as check_permission

if TYPE_CHECKING:
    from node.client.connection import ClientNode

__all__ = ["DirectPublisher", "DirectRefused", "open_direct"]

ALARM_RECHECK = 0.5  # seconds between looks at a raised resource alarm


class DirectRefused(Exception):
    """The login, the vhost, a permission or the queue refused; the text says which."""


async def open_direct(node: ClientNode, user: str | None, password: str, vhost: str, queue: str,
                      on_credit: Callable[[], None], on_end: Callable[[str], None]) -> DirectPublisher:  # fmt: skip
    """A publisher into `queue` of `vhost` as `user` (None: SASL ANONYMOUS's), checked as a
    client attaching to /queues/`queue` would be."""
    if user is None:
        name, grant = await node.logins.login_grant("ANONYMOUS", None, "127.0.0.1")
    else:
        plain = b"\0" + user.encode() + b"\0" + password.encode()
        name, grant = await node.logins.login_grant("PLAIN", plain, "127.0.0.1")
    if name is None:
        raise DirectRefused(f"login refused for user '{user or node.auth.anonymous_user}'")
    host = node.vhosts.get(vhost)
    if host is None:
        raise DirectRefused(f"virtual host '{vhost}' does not exist")
    permission = grant.permission(vhost) if grant is not None else node.auth.permission(name, vhost)
    if permission is None:
        raise DirectRefused(f"access to vhost '{vhost}' refused for user '{name}'")
    try:
        check_permission(permission, name, vhost, "write", "", "exchange")  # the default exchange
        host.queue(queue)
    except RoutingError as e:
        raise DirectRefused(f"attach to '/queues/{queue}' refused: {e}") from None
    publisher = DirectPublisher(node, host, queue, node.config.max_unconfirmed, on_credit, on_end)
    if grant is not None and grant.expires_at is not None:
        publisher.expiry = node.loop.call_later(max(0.0, grant.expires_at - time.time()), on_end,
                                                "credential expired")  # fmt: skip
    return publisher


class DirectPublisher:
    def __init__(self, node: ClientNode, vhost: Any, queue: str, window: int, on_credit: Callable[[], None],
                 on_end: Callable[[str], None]) -> None:  # fmt: skip
        self.node, self.vhost, self.queue, self.window = node, vhost, queue, window
        self.on_credit, self.on_end = on_credit, on_end
        self.unconfirmed = 0
        self.closed = False
        self.expiry: Any = None  # a token's timer
        self._waiting = False  # on_credit owed once sending may go on
        self._credit_soon = False  # on_credit is scheduled
        self._routed_to: list[Any] = []

    @property
    def credit(self) -> int:
        """How many messages may be published now."""
        room = self.window - self.unconfirmed
        if room <= 0 or self.closed:
            return 0
        if self.node.alarms.active:
            self._wait(lambda: self.node.loop.call_later(ALARM_RECHECK, self._credit_back))
            return 0
        for queue in self._routed_to:
            hold = getattr(queue, "publish_hold", None)
            if hold is not None and hold.held:
                self._wait(lambda hold=hold: hold.wait(self._credit_back))
                return 0
        return room

    def publish(self, payload: bytes, done: Callable[[Any], None] | None) -> None:
        """Routes one message; `done(delivery state)` once its outcome is known (None: the
        sender settled it already, it is not confirmed)."""
        node = self.node
        node.metrics.count_received(len(payload), done is None)
        queue = self.vhost.queues.get(self.queue)
        if queue is None:  # deleted: the sender stops, and what it had in flight stays at its source
            self.close()
            self.on_end(f"the queue '{self.queue}' in vhost '{self.vhost.name}' was deleted")
            return
        limit = node.config.max_message_size
        if limit and len(payload) > limit:
            return _tell(done, rejected(Condition.MESSAGE_SIZE_EXCEEDED,
                                        f"message size {len(payload)} exceeds max_message_size {limit}"))  # fmt: skip
        try:
            msg = Message.from_bytes(payload)
            cc = carbon_copy_keys(msg)
            queues = [queue] if cc is None else self.vhost.route_keys("", [self.queue, *cc], msg)
        except RoutingError as e:
            return _tell(done, rejected(e.condition, e.description or ""))
        except Exception as e:  # a malformed message: rejected, as a client's would be
            return _tell(done, rejected(getattr(e, "condition", Condition.INTERNAL_ERROR), str(e)))
        self._routed_to = queues
        if done is None:
            enqueue(node, payload, msg, queues, "", self.queue, None)
            return
        self.unconfirmed += 1
        enqueue(node, payload, msg, queues, "", self.queue, Confirm(self, done, len(queues)).confirm)

    def close(self) -> None:
        self.closed = True
        if self.expiry is not None:
            self.expiry.cancel()

    # ------------------------------------------------------------ Confirm's publisher

    def confirmed(self, done: Callable[[Any], None], state: Any) -> None:
        self.unconfirmed -= 1
        self.node.metrics.confirmed += 1
        if not self.closed:
            done(state)
            self._credit_back()

    def outcome_unknown(self, done: Callable[[Any], None], description: str) -> None:
        """Maybe stored: the sender is told to send it again (released), at least once."""
        self.confirmed(done, RELEASED)

    # ------------------------------------------------------------ flow

    def _wait(self, arrange: Callable[[], Any]) -> None:
        if not self._waiting:
            self._waiting = True
            arrange()

    def _credit_back(self) -> None:
        """on_credit at the end of this loop turn, once however many confirms come in it: a
        confirm given inside `publish` (a queue that stores at once) must not send more from
        within the sender's own loop."""
        if not self._credit_soon and not self.closed:
            self._credit_soon = True
            self.node.loop.call_soon(self._give_credit)

    def _give_credit(self) -> None:
        self._credit_soon = self._waiting = False
        if not self.closed:
            self.on_credit()


def _tell(done: Callable[[Any], None] | None, state: Any) -> None:
    """A refused message's outcome, unless it was sent settled."""
    if done is not None:
        done(state)
