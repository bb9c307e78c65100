"""Topic permissions (RabbitMQ's topic authorisation): per user, vhost and
exchange, a write and a read pattern that the routing keys of a topic
exchange must match. Write is checked when a message is published to the
exchange, read when a queue or exchange is bound to it with a binding key.
A user without an entry for the exchange is not restricted.

Patterns may name {username}, {vhost} and {client_id}, replaced by the
connection's values before matching (unanchored, as permissions are).

A caller who logged in with an OAuth 2 token is checked against the token's
topic scopes instead (routing/oauth_scopes.py), and always: RabbitMQ's
OAuth 2 backend has no "no entry, no restriction" rule.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from routing.oauth_scopes import Scopes
from routing.permissions import AccessRefused

__all__ = ["check"]

Entries = Mapping[tuple[str, str, str], tuple[str, str]]  # (user, vhost, exchange) -> (write, read)


def check(entries: Entries, user: str, vhost: str, exchange: str, routing_key: str, kind: str,
          client_id: str = "", scopes: Scopes | None = None) -> None:  # fmt: skip
    """Raises AccessRefused unless `kind` ("write" or "read") of
    `routing_key` on the topic exchange is allowed: by the token's `scopes`
    when the caller has a token, else by the user's `entries`."""
    if scopes is not None:
        allowed = scopes.topic_allowed(kind, vhost, exchange, routing_key)
    else:
        entry = entries.get((user, vhost, exchange))
        if entry is None:
            return
        allowed = _matches(entry[0] if kind == "write" else entry[1], user, vhost, client_id, routing_key)
    if not allowed:
        raise AccessRefused(f"{kind} access to topic '{routing_key}' in exchange '{exchange}' in vhost '{vhost}' "
                            f"refused for user '{user}'")  # fmt: skip


def _matches(pattern: str, user: str, vhost: str, client_id: str, routing_key: str) -> bool:
    pattern = pattern.replace("{username}", user).replace("{vhost}", vhost).replace("{client_id}", client_id)
    try:
        return re.search(pattern, routing_key) is not None
    except re.error:
        return False
