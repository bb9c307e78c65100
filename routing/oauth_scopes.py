"""What an OAuth 2 token's scopes grant, in RabbitMQ's scope language, as the
same `Permission` entries and user tags a user of the node has
(routing/permissions.py), so a token is checked by exactly the code that
checks users.

A scope the node reads starts with the prefix (by default the resource
server id and a dot, `rabbitmq.`); the others are someone else's and are
ignored. After the prefix:

    read:<vhost>/<name>        consume, bind from (RabbitMQ's read)
    write:<vhost>/<name>       publish, bind to (write)
    configure:<vhost>/<name>   declare, delete (configure)
    tag:<tag>                  administrator, management, monitoring, policymaker

`*` in the vhost or name matches any run of characters (`*/*`: everything),
the rest matches literally, percent-encoded (`%2F` is the default vhost `/`,
which the separator would otherwise split). A third part
(`read:<vhost>/<exchange>/<routing key>`) is a topic scope: its vhost and
name apply as a two-part scope's do, and its routing key pattern is what
`topic_allowed` checks. As RabbitMQ's OAuth 2 plugin, a token is always
checked on a topic exchange (there is no "unrestricted" as for a user
without topic permissions): publishing to one, or binding from one, needs a
three-part scope matching the vhost, the exchange and the routing key.
A token grants access to a vhost when some permission scope names it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import unquote

from routing.permissions import Permission

KINDS = ("configure", "write", "read")


@dataclass(frozen=True, slots=True)
class ResourceScope:
    kind: str  # configure, write or read
    vhost: str  # wildcard patterns as written: `*` is the only special character,
    name: str  # the parts between are percent-decoded when matched (`%2A` is a literal `*`)
    routing_key: str | None = None  # a topic scope's third part; None: not a topic scope


@dataclass(frozen=True)
class Scopes:
    resources: tuple[ResourceScope, ...] = ()
    tags: tuple[str, ...] = ()
    _by_vhost: dict = field(default_factory=dict, compare=False, repr=False)  # vhost -> Permission | None

    def permission(self, vhost: str) -> Permission | None:
        """The permission entry these scopes amount to in `vhost`: a pattern
        per kind, "" (nothing) where no scope grants that kind; None when no
        scope names the vhost (no access to it, as a user without an entry)."""
        if vhost in self._by_vhost:
            return self._by_vhost[vhost]
        names: dict[str, list[str]] = {kind: [] for kind in KINDS}
        for scope in self.resources:
            if wildcard_regex(scope.vhost).fullmatch(vhost):
                names[scope.kind].append(scope.name)
        if not any(names.values()):
            permission = None
        else:
            permission = Permission(*(alternation(names[kind]) for kind in KINDS))
        if len(self._by_vhost) < 1024:  # vhosts are few; bounded anyway
            self._by_vhost[vhost] = permission
        return permission

    def topic_allowed(self, kind: str, vhost: str, exchange: str, routing_key: str) -> bool:
        """Whether a topic scope of `kind` ("write" to publish, "read" to
        bind) covers `routing_key` on the topic exchange `exchange`."""
        return any(
            scope.kind == kind
            and scope.routing_key is not None
            and wildcard_regex(scope.vhost).fullmatch(vhost) is not None
            and wildcard_regex(scope.name).fullmatch(exchange) is not None
            and wildcard_regex(scope.routing_key).fullmatch(routing_key) is not None
            for scope in self.resources
        )


def parse(scopes: list[str], prefix: str) -> Scopes:
    """The scopes that start with `prefix`, read; malformed ones grant nothing."""
    resources, tags = [], []
    for scope in scopes:
        if not scope.startswith(prefix):
            continue
        action, sep, rest = scope[len(prefix) :].partition(":")
        if not sep:
            continue
        if action == "tag":
            if rest:
                tags.append(rest)
        elif action in KINDS:
            parts = rest.split("/")
            if len(parts) in (2, 3) and parts[0] and parts[1]:
                key = parts[2] if len(parts) == 3 else None
                resources.append(ResourceScope(action, parts[0], parts[1], key))
    return Scopes(tuple(resources), tuple(dict.fromkeys(tags)))


@lru_cache(maxsize=1024)
def wildcard_regex(pattern: str) -> re.Pattern:
    """Python's re for matching vhost names here (the patterns are literals
    and `.*` only: linear)."""
    return re.compile(wildcard_body(pattern), re.DOTALL)


def wildcard_body(pattern: str) -> str:
    return ".*".join(re.escape(unquote(part)) for part in pattern.split("*"))


def alternation(patterns: list[str]) -> str:
    """One anchored RE2 pattern matching any of the wildcard patterns; "" for none."""
    if not patterns:
        return ""
    return "^(?s:" + "|".join(wildcard_body(p) for p in dict.fromkeys(patterns)) + ")$"
