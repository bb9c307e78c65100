"""A connection's credential when it logged in with an OAuth 2 token
(routing/oauth.py): its permissions are the token's scopes, and the token
ends it: at `exp` the connection is closed with amqp:unauthorized-access,
unless the client sent a newer token first with `PUT /auth/tokens` on the
/management node (RabbitMQ 4's in-band refresh). The new token's scopes
apply from then on to what is checked then: new links, management requests;
links already attached keep what they were granted (they are not re-checked).
"""

from __future__ import annotations

import functools
import logging
import time
from typing import TYPE_CHECKING, Any

from amqp.errors import Condition
from routing.oauth import Grant, KeyConfigError, TokenRefused, TokenVerifier, UnknownKey, load_keys
from routing.permissions import Permission

if TYPE_CHECKING:
    import asyncio

    from node.client.connection import ClientNode

log = logging.getLogger("warren.connection")


class TokenCredentials:
    """The token half of `ConnectionHandler` (node/client/connection.py)."""

    node: ClientNode
    user: str | None
    name: str
    grant: Grant | None = None  # set when the connection logged in with a token
    _token_timer: asyncio.TimerHandle | None = None

    def permission(self, vhost: str) -> Permission | None:
        """The connection's permission entry in `vhost`: its token's scopes,
        or its user's entry (None: no access)."""
        if self.grant is not None:
            return self.grant.permission(vhost)
        return self.node.auth.permission(self.user, vhost)

    def token_granted(self, grant: Grant) -> None:
        """The login or a refresh accepted `grant`: it rules from now until it expires."""
        self.grant = grant
        self._cancel_token_timer()
        if grant.expires_at is not None:
            # exp is wall-clock (Unix) time; the loop's timers run on a monotonic clock
            delay = max(0.0, grant.expires_at - time.time())
            self._token_timer = self.node.loop.call_later(delay, self._token_expired)

    async def refresh_token(self, token: Any) -> None:
        """PUT /auth/tokens: `token` (binary or string) replaces the
        connection's. Raises TokenRefused when it is not accepted, which
        leaves the current one in force, and ValueError when the connection
        did not log in with a token."""
        verifier = self.node.auth.tokens
        if self.grant is None or verifier is None:
            raise ValueError("this connection did not log in with a token")
        if isinstance(token, bytes | bytearray | memoryview):
            token = bytes(token).decode("utf-8", "replace")
        if not isinstance(token, str):
            raise TokenRefused("the body must be the token, as binary or a string")
        try:
            grant = verifier.verify(token)
        except UnknownKey:
            if not await self.node.logins.reload_token_keys():  # a key the provider just added?
                raise
            grant = verifier.verify(token)
        self.token_granted(grant)
        log.info("connection %s (user %s) refreshed its token", self.name, self.user)

    def _token_expired(self) -> None:
        self._token_timer = None
        log.info("closing connection %s (user %s): its token expired", self.name, self.user)
        self.force_close(Condition.UNAUTHORIZED_ACCESS, "credential expired")

    def _cancel_token_timer(self) -> None:
        if self._token_timer is not None:
            self._token_timer.cancel()
            self._token_timer = None


def verifier_from_config(cfg: Any) -> TokenVerifier | None:
    """The node's token verifier, None unless oauth_enabled; raises
    KeyConfigError (the node does not start) on keys that do not load."""
    if not cfg.oauth_enabled:
        return None
    keys = load_keys(cfg.oauth_signing_keys, cfg.oauth_jwks_file, cfg.oauth_jwks_url)
    if not keys:
        raise KeyConfigError("oauth_enabled needs a signing key: oauth_signing_keys, oauth_jwks_file or oauth_jwks_url")
    if cfg.oauth_default_key and cfg.oauth_default_key not in keys:
        raise KeyConfigError(f"oauth_default_key {cfg.oauth_default_key!r} is not one of the signing keys")
    reload = None
    if cfg.oauth_jwks_url or cfg.oauth_jwks_file:  # an identity provider's keys change: read them again
        reload = functools.partial(load_keys, cfg.oauth_signing_keys, cfg.oauth_jwks_file, cfg.oauth_jwks_url)
    return TokenVerifier(keys, cfg.oauth_resource_server_id, cfg.oauth_default_key, cfg.oauth_scope_prefix or None,
                         cfg.oauth_verify_aud, reload, cache_size=cfg.login_cache_size)  # fmt: skip
