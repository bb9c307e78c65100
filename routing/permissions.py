"""Who may do what, as in RabbitMQ: per user and vhost, three regular
expressions over resource names (configure, write, read), and user tags
(administrator, management, monitoring) for the management interfaces.

What each operation needs (RabbitMQ's access-control table):
- declare or delete a queue or exchange: configure on it;
- publish to an exchange: write on it (the default exchange is checked as
  "amq.default", so publishing to /queues/q needs write on amq.default);
- consume from or purge a queue: read on it (purge needs read on the queue);
- bind: write on the destination, read on the source exchange.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from amqp.errors import Condition
from routing.errors import RoutingError

DEFAULT_EXCHANGE_RESOURCE = "amq.default"
TAGS = ("administrator", "management", "policymaker", "monitoring")


class AccessRefused(RoutingError):
    condition_code = Condition.UNAUTHORIZED_ACCESS


@dataclass(frozen=True, slots=True)
class Permission:
    configure: str = ".*"
    write: str = ".*"
    read: str = ".*"


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> re.Pattern:
    return re.compile(pattern)


def _allows(pattern: str, resource: str) -> bool:
    # RabbitMQ matches with re:run, i.e. a search anchored only where the
    # pattern anchors; "" denies everything.
    return bool(pattern) and _compiled(pattern).search(resource) is not None


def resource_name(exchange_or_queue: str) -> str:
    return exchange_or_queue or DEFAULT_EXCHANGE_RESOURCE


def check(permission: Permission | None, user: str, vhost: str, kind: str, resource: str, what: str) -> None:
    """Raises AccessRefused unless `permission` grants `kind` (configure,
    write or read) on the resource."""
    name = resource_name(resource)
    if permission is None or not _allows(getattr(permission, kind), name):
        raise AccessRefused(f"{kind} access to {what} '{name}' in vhost '{vhost}' refused for user '{user}'")


def validate_pattern(pattern: str) -> None:
    try:
        re.compile(pattern)
    except re.error as e:
        raise ValueError(f"invalid permission pattern {pattern!r}: {e}") from None
