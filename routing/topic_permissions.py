"""Topic permissions (RabbitMQ's topic authorisation): per user, vhost and
exchange, a write and a read pattern that the routing keys of a topic
exchange must match. Write is checked when a message is published to the
exchange, read when a queue or exchange is bound to it with a binding key.
A user without an entry for the exchange is not restricted.

Patterns may name {username}, {vhost} and {client_id}, replaced by the
connection's values before matching (unanchored, as permissions are).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from routing.permissions import AccessRefused

__all__ = ["check"]

Entries = Mapping[tuple[str, str, str], tuple[str, str]]  # (user, vhost, exchange) -> (write, read)


def check(entries: Entries, user: str, vhost: str, exchange: str, routing_key: str, kind: str,
          client_id: str = "") -> None:  # fmt: skip
    """Raises AccessRefused unless `kind` ("write" or "read") of
    `routing_key` on the topic exchange is allowed."""
    entry = entries.get((user, vhost, exchange))
    if entry is None:
        return
    pattern = entry[0] if kind == "write" else entry[1]
    pattern = pattern.replace("{username}", user).replace("{vhost}", vhost).replace("{client_id}", client_id)
    try:
        allowed = re.search(pattern, routing_key) is not None
    except re.error:
        allowed = False
    if not allowed:
        raise AccessRefused(f"{kind} access to topic '{routing_key}' in exchange '{exchange}' in vhost '{vhost}' "
                            f"refused for user '{user}'")  # fmt: skip
