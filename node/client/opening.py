"""A client connection's way in: the SASL login (checked off the event loop,
node/client/login.py), then OPEN: the node, vhost and user connection limits
and the vhost the connection lives in."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from amqp import definitions as d
from amqp import events as ev
from amqp.errors import Condition
from amqp.types import Symbol
from node.client.login import LoginsBusy

if TYPE_CHECKING:
    pass

log = logging.getLogger("warren.connection")
CLOSE_GRACE_S = 2.0  # how long a forced close waits for the client's CLOSE


OFFERED_CAPABILITIES = [Symbol("LINK_PAIR_V1_0"), Symbol("ANONYMOUS-RELAY")]


class NotOffered(Exception):
    """The client chose a SASL mechanism this connection did not offer."""


class ConnectionOpening:
    """The SASL and OPEN half of `ConnectionHandler` (node/client/connection.py)."""

    def _on_sasl(self, event: ev.SaslInitReceived) -> None:
        if self._taken is not None:  # replayed: the worker that accepted the connection checked it
            self.engine.sasl_outcome(True)
            return
        # The engine holds whatever the client sent after its SASL init until
        # the outcome is given; the check runs off the loop (node/client/login.py).
        self._login = self.node.loop.create_task(self._authenticate(event))

    async def _authenticate(self, event: ev.SaslInitReceived) -> None:
        code, grant = None, None
        try:
            if event.mechanism not in self.engine.sasl_mechanisms:
                raise NotOffered(event.mechanism)
            user, grant = await self.node.logins.login_grant(event.mechanism, event.initial_response, self.peer[0],
                                                             self.certificate_user)  # fmt: skip
        except LoginsBusy:
            user, code = None, d.SASL_SYS_TEMP
        except NotOffered:
            user = None
        except Exception:  # a bug of ours must cost one connection, never the node
            log.exception("internal error authenticating %s", self.name)
            user, code = None, d.SASL_SYS
        if self._closed or self.engine.closed:
            return
        self.user = user
        if grant is not None:
            self.token_granted(grant)  # node/client/tokens.py: its scopes, and its expiry
        self.engine.sasl_outcome(user is not None, code)
        if user is None:
            log.info("authentication failed on %s (%s)", self.name, event.mechanism)
        self.data_received(b"")  # the frames the client pipelined behind its SASL init

    def _on_open(self, open_: Any) -> None:
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None
        hostname = open_.hostname or ""
        vhost_name = hostname[len("vhost:") :] if hostname.startswith("vhost:") else "/"
        vhost = self.node.vhosts.get(vhost_name)
        # As RabbitMQ, the node-wide limit counts every accepted socket (this
        # one included) and is checked first, before the vhost.
        limit = self.node.config.max_connections
        if limit > 0 and len(self.node.connections) > limit:
            self.engine.open(properties=self.node.server_properties(), offered_capabilities=OFFERED_CAPABILITIES)
            self.engine.close(Condition.RESOURCE_LIMIT_EXCEEDED,
                              f"connection refused: node connection limit ({limit}) is reached")  # fmt: skip
            return
        if vhost is None:
            return self._refuse_open(f"virtual host '{vhost_name}' does not exist")
        if self.permission(vhost_name) is None:
            return self._refuse_open(f"access to vhost '{vhost_name}' refused for user '{self.user}'")
        self.engine.open(properties=self.node.server_properties(), offered_capabilities=OFFERED_CAPABILITIES)
        refusal = self._over_connection_limit(vhost)
        if refusal is not None:
            self.engine.close(Condition.RESOURCE_LIMIT_EXCEEDED, refusal)
            return
        self.vhost = vhost

    def _refuse_open(self, reason: str) -> None:
        """A missing or forbidden vhost: as RabbitMQ 4 does, no OPEN and no
        CLOSE, the socket is closed. An OPEN+CLOSE pair would be the polite
        [2.4.1] answer, but RabbitMQ's own client takes a remote CLOSE for a
        dropped connection and retries with back-off for minutes, while a
        closed socket fails its dial at once."""
        log.info("refusing connection %s (user %s): %s", self.name, self.user, reason)
        self._closed = True
        if self.transport is not None:
            self.transport.write(self.engine.data_to_send())  # the SASL outcome and protocol header
            self.transport.close()

    def _over_connection_limit(self, vhost: Any) -> str | None:
        """The refusal, as RabbitMQ words it, when the vhost's or the user's
        max-connections limit (metadata; negative: none) is reached. Counted
        over this node's open connections: the node does not track the
        connections of the other members."""
        projections = self.node.projections
        vhost_limit = projections.limit("vhost", vhost.name, "max-connections")
        user_limit = projections.limit("user", self.user or "", "max-connections")
        if vhost_limit is not None and vhost_limit >= 0:
            if sum(1 for c in self.node.connections if c.vhost is vhost) >= vhost_limit:
                return (f"access to vhost '{vhost.name}' refused for user '{self.user}': "
                        f"vhost connection limit ({vhost_limit}) is reached")  # fmt: skip
        if user_limit is not None and user_limit >= 0:
            if sum(1 for c in self.node.connections if c.vhost is not None and c.user == self.user) >= user_limit:
                return f"connection refused for user '{self.user}': user connection limit ({user_limit}) is reached"
        return None
