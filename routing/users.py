"""SASL authentication [5.3] against the node's users.

Passwords are stored as salted PBKDF2-SHA256 hashes (standard library,
deliberately slow). As in RabbitMQ, the default user may only connect from
loopback addresses.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from routing import rabbit_passwords
from routing.permissions import Permission

ITERATIONS = 100_000


def hash_password(password: str, salt: bytes | None = None) -> str:
    salt = os.urandom(16) if salt is None else salt
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, ITERATIONS)
    return f"pbkdf2-sha256${ITERATIONS}${salt.hex()}${digest.hex()}"


def check_password(password: str, stored: str) -> bool:
    if rabbit_passwords.is_rabbit_hash(stored):  # imported from RabbitMQ, not yet rehashed
        return rabbit_passwords.check(password, stored)
    try:
        scheme, iterations, salt, digest = stored.split("$")
    except ValueError:
        return False
    if scheme != "pbkdf2-sha256":
        return False
    computed = hashlib.pbkdf2_hmac("sha256", password.encode(), bytes.fromhex(salt), int(iterations))
    return hmac.compare_digest(computed.hex(), digest)


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return host == "localhost"


@dataclass
class User:
    name: str
    password_hash: str
    tags: list[str] = field(default_factory=list)


class Authenticator:
    def __init__(self, anonymous_user: str | None, loopback_users: list[str]):
        self.users: dict[str, User] = {}
        self.anonymous_user = anonymous_user
        self.loopback_users = set(loopback_users)
        self._verified: dict[tuple[str, str], bool] = {}  # PBKDF2 is slow on purpose; don't pay it per connection
        self.permissions: dict[tuple[str, str], Permission] = {}  # (user, vhost) ->
        # Called with (user, password) after a login verified against a hash in
        # RabbitMQ's format, so the node can store its own hash instead.
        self.on_legacy_login: Callable[[str, str], None] | None = None

    def add_user(self, name: str, password: str | None, tags: list[str] | None = None,
                 password_hash: str | None = None) -> None:  # fmt: skip
        """Creates or replaces a user; `password_hash` loads a stored one."""
        if password_hash is None:
            password_hash = hash_password(password) if password is not None else ""
        self.users[name] = User(name, password_hash, list(tags or []))
        self._verified = {k: v for k, v in self._verified.items() if k[0] != name}

    def delete_user(self, name: str) -> bool:
        if self.users.pop(name, None) is None:
            return False
        self._verified = {k: v for k, v in self._verified.items() if k[0] != name}
        self.permissions = {k: v for k, v in self.permissions.items() if k[0] != name}
        return True

    def set_permissions(self, user: str, vhost: str, configure: str, write: str, read: str) -> None:
        self.permissions[(user, vhost)] = Permission(configure, write, read)

    def clear_permissions(self, user: str, vhost: str) -> bool:
        return self.permissions.pop((user, vhost), None) is not None

    def permission(self, user: str, vhost: str) -> Permission | None:
        return self.permissions.get((user, vhost))

    def vhost_deleted(self, vhost: str) -> None:
        self.permissions = {k: v for k, v in self.permissions.items() if k[1] != vhost}

    def authenticate(self, mechanism: str, response: bytes | None, peer_host: str) -> str | None:
        """The user name, or None when the credentials are refused."""
        if mechanism == "PLAIN":
            parts = (response or b"").split(b"\x00")
            if len(parts) != 3:
                return None
            name, password = parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")
            user = self.users.get(name)
            if user is None or not self._check(user, password):
                return None
        elif mechanism == "ANONYMOUS" and self.anonymous_user:
            name = self.anonymous_user
            if name not in self.users:
                return None
        else:
            return None
        if name in self.loopback_users and not is_loopback(peer_host):
            return None
        return name

    def _check(self, user: User, password: str) -> bool:
        key = (user.name, password)
        ok = self._verified.get(key)
        if ok is None:
            ok = check_password(password, user.password_hash)
            if len(self._verified) < 10_000:
                self._verified[key] = ok
            if ok and self.on_legacy_login is not None and rabbit_passwords.is_rabbit_hash(user.password_hash):
                self.on_legacy_login(user.name, password)
        return ok
