"""Who may do what, as in RabbitMQ: per user and vhost, three regular
expressions over resource names (configure, write, read), and user tags
(administrator, management, monitoring) for the management interfaces.

What each operation needs (RabbitMQ's access-control table):
- declare or delete a queue or exchange: configure on it;
- publish to an exchange: write on it (the default exchange is checked as
  "amq.default", so publishing to /queues/q needs write on amq.default);
- consume from or purge a queue: read on it (purge needs read on the queue);
- bind: write on the destination, read on the source exchange.

Patterns are matched by RE2 (google-re2), in time linear in the resource
name: with a backtracking engine an administrator's `(a+)+$` let a client
freeze the node for seconds per check by naming a queue `aaa...a!`. RE2 has
no backreferences or lookaround; a pattern using them is refused when it is
set (400) and, if one was stored before, grants nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache

import re2

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


log = logging.getLogger("warren.permissions")

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is our error to report, not RE2's to print


def _compile(pattern: str) -> re2._Regexp:
    return re2.compile(pattern, options=_OPTIONS)


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> re2._Regexp | None:
    try:
        return _compile(pattern)
    except re2.error as e:
        log.warning("permission pattern %r is not supported (%s): it grants nothing", pattern, e)
        return None


def _allows(pattern: str, resource: str) -> bool:
    # RabbitMQ matches with re:run, i.e. a search anchored only where the
    # pattern anchors; "" denies everything.
    if not pattern:
        return False
    compiled = _compiled(pattern)
    return compiled is not None and compiled.search(resource) is not None


def resource_name(exchange_or_queue: str) -> str:
    return exchange_or_queue or DEFAULT_EXCHANGE_RESOURCE


def check(permission: Permission | None, user: str, vhost: str, kind: str, resource: str, what: str) -> None:
    """Raises AccessRefused unless `permission` grants `kind` (configure,
    write or read) on the resource."""
    name = resource_name(resource)
    if permission is None or not _allows(getattr(permission, kind), name):
        raise AccessRefused(f"{kind} access to {what} '{name}' in vhost '{vhost}' refused for user '{user}'")


def validate_pattern(pattern: str) -> None:
    """Raises ValueError unless RE2 can match the pattern (in linear time)."""
    try:
        _compile(pattern)
    except re2.error as e:
        reason = e.args[0].decode(errors="replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        raise ValueError(f"invalid permission pattern {pattern!r}: {reason} (patterns are matched in linear "
                         f"time: no backreferences or lookaround)") from None
