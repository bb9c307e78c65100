"""Topic authorisation for a connection (routing/topic_permissions.py):
publishing to a topic exchange needs write on the routing key, binding
from one (a v1 source `/exchange/X/key` or `/topic/key`) read on the
binding key. A connection that logged in with an OAuth 2 token is checked
against its token's topic scopes, a user against its topic permissions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from routing import topic_permissions

if TYPE_CHECKING:
    from node.client.connection import ConnectionHandler


def check(handler: ConnectionHandler, exchange: str, key: str, kind: str) -> None:
    """Raises AccessRefused unless `kind` ("write" or "read") of `key` on
    `exchange` is allowed; other exchange types are not restricted."""
    entries = handler.node.projections.topic_permissions
    grant = handler.grant
    if not entries and grant is None:
        return  # the common case: nothing to check, no exchange lookup
    x = handler.vhost.routing.exchange(exchange)
    if x is None or str(x.type) != "topic":
        return
    remote = getattr(handler.engine, "remote_open", None)
    client_id = (remote.container_id or "") if remote is not None else ""
    topic_permissions.check(entries, handler.user or "", handler.vhost.name, exchange, key, kind, client_id,
                            grant.scopes if grant is not None else None)  # fmt: skip
