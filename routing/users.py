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
from collections import OrderedDict
from dataclasses import dataclass, field

from routing import rabbit_passwords
from routing.oauth import Grant, TokenRefused, TokenVerifier, UnknownKey, looks_like_jwt
from routing.permissions import Permission

ITERATIONS = 100_000
SCHEME = "pbkdf2-sha256"


def derive(password: bytes, salt: bytes, iterations: int) -> bytes:
    """PBKDF2-SHA256. It releases the GIL, so a worker thread running it
    leaves the event loop free (node/client/login.py)."""
    return hashlib.pbkdf2_hmac("sha256", password, salt, iterations)


PBKDF2_ALGORITHM = "warren_pbkdf2_sha256"  # this format's name in definitions (hashing_algorithm)
HASHING_ALGORITHMS = (PBKDF2_ALGORITHM, *rabbit_passwords.ALGORITHMS)  # the setting password_hashing_module's values


def hash_password(password: str, salt: bytes | None = None, algorithm: str = PBKDF2_ALGORITHM) -> str:
    """A new stored hash of `password`: Warren's PBKDF2, or RabbitMQ's format,
    which RabbitMQ can verify after a definitions export (docs/security.md)."""
    if algorithm != PBKDF2_ALGORITHM:
        return rabbit_passwords.hash_password(algorithm, password, salt)
    salt = os.urandom(16) if salt is None else salt
    digest = derive(password.encode(), salt, ITERATIONS)
    return f"{SCHEME}${ITERATIONS}${salt.hex()}${digest.hex()}"


def parse_hash(stored: str) -> tuple[int, bytes, bytes] | None:
    """(iterations, salt, digest) of a stored hash, or None when it is not one."""
    try:
        scheme, iterations, salt, digest = stored.split("$")
        if scheme != SCHEME:
            return None
        return int(iterations), bytes.fromhex(salt), bytes.fromhex(digest)
    except ValueError:
        return None


def check_password(password: str, stored: str) -> bool:
    if rabbit_passwords.is_rabbit_hash(stored):  # imported from RabbitMQ, kept until the password changes
        # Pay a PBKDF2 as well: a wrong password for such a user then takes as
        # long as for an unknown user (checked against a PBKDF2 dummy), so the
        # time of a refusal does not tell that the user exists.
        derive(password.encode(), b"rabbit-hash-pace", ITERATIONS)
        return rabbit_passwords.check(password, stored)
    parsed = parse_hash(stored)
    if parsed is None:
        return False
    iterations, salt, digest = parsed
    return hmac.compare_digest(derive(password.encode(), salt, iterations), digest)


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and their IPv4-mapped IPv6 form
    (::ffff:127.0.0.1, what a dual-stack listener reports for an IPv4 peer)."""
    try:
        ip = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return host == "localhost"
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


@dataclass
class User:
    name: str
    password_hash: str
    tags: list[str] = field(default_factory=list)


@dataclass
class LoginAttempt:
    """One login, from the SASL response to the verdict, in three steps so
    that the slow middle one can run off the event loop: `Authenticator.plan`
    (fast: parse, cache), `Authenticator.verify` (PBKDF2; thread-safe),
    `Authenticator.conclude` (fast: cache, loopback rule)."""

    name: str | None  # the user it claims to be; None: malformed or refused outright
    password: str = ""
    stored: str = ""  # the hash to check: the user's, or the dummy one for an unknown user
    known: bool = False  # the user exists and has a password that can match
    cache_key: tuple | None = None
    needs_hash: bool = False  # PBKDF2 must run: the cache had no answer
    ok: bool = False
    grant: Grant | None = None  # a token's, when the password was an OAuth 2 token (routing/oauth.py)
    refusal: str = ""  # why a token was refused, for the log
    unknown_key: bool = False  # refused because it names a key not (yet) loaded


class Authenticator:
    def __init__(self, anonymous_user: str | None, loopback_users: list[str], cache_size: int = 10_000):
        self.users: dict[str, User] = {}
        self.anonymous_user = anonymous_user
        self.loopback_users = set(loopback_users)
        self.permissions: dict[tuple[str, str], Permission] = {}  # (user, vhost) ->
        # PBKDF2 is slow on purpose; don't pay it per connection. Only
        # successes are kept, keyed by (user, stored hash, keyed digest of the
        # password): the plaintext is never held, a changed password misses,
        # and failures (unknown users included) always pay the full price, so
        # their timing tells nothing. Least recently used entries go first.
        self._verified: OrderedDict[tuple[str, str, bytes], None] = OrderedDict()
        self.cache_size = cache_size
        self._cache_secret = os.urandom(32)
        self._dummy_hash = ""  # made on first use: an unknown user is checked against it
        self.password_hashing = PBKDF2_ALGORITHM  # how new passwords are hashed (HASHING_ALGORITHMS)
        # OAuth 2: with a verifier, a PLAIN password that is a JWT is checked as
        # a token (RabbitMQ's auth_backends = oauth2, internal); None: off.
        self.tokens: TokenVerifier | None = None

    def add_user(self, name: str, password: str | None, tags: list[str] | None = None,
                 password_hash: str | None = None) -> None:  # fmt: skip
        """Creates or replaces a user; `password_hash` loads a stored one."""
        if password_hash is None:
            password_hash = hash_password(password, algorithm=self.password_hashing) if password is not None else ""
        self.users[name] = User(name, password_hash, list(tags or []))

    def delete_user(self, name: str) -> bool:
        if self.users.pop(name, None) is None:
            return False
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

    # -- logging in ----------------------------------------------------------------

    def authenticate(self, mechanism: str, response: bytes | None, peer_host: str,
                     external: str | None = None) -> str | None:  # fmt: skip
        """The user name, or None when the credentials are refused. All three
        steps on the caller's thread: for tools and tests; the node runs
        `verify` in a worker thread (node/client/login.py)."""
        attempt = self.plan(mechanism, response, external)
        if attempt.needs_hash:
            attempt.ok = self.verify(attempt)
        return self.conclude(attempt, peer_host)

    def plan(self, mechanism: str, response: bytes | None, external: str | None = None) -> LoginAttempt:
        """Parses the SASL response and consults the cache. `external` is the
        identity the transport proved (a verified TLS client certificate's
        subject), the user SASL EXTERNAL logs in as; the client's response
        (an authorization identity) is ignored, as RabbitMQ does."""
        if mechanism == "ANONYMOUS":
            name = self.anonymous_user
            return LoginAttempt(name, ok=bool(name) and name in self.users)
        if mechanism == "EXTERNAL":
            return LoginAttempt(external, ok=bool(external) and external in self.users)
        if mechanism != "PLAIN":
            return LoginAttempt(None)
        parts = (response or b"").split(b"\x00")
        if len(parts) != 3:
            return LoginAttempt(None)
        name, password = parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")
        if self.tokens is not None and looks_like_jwt(password):
            return self.token_attempt(password)
        user = self.users.get(name)
        known = user is not None and (parse_hash(user.password_hash) is not None
                                      or rabbit_passwords.is_rabbit_hash(user.password_hash))
        if not known:  # unknown, or no password: the same work as a wrong password
            return LoginAttempt(name, password, self.dummy_hash(), needs_hash=True)
        key = (name, user.password_hash, hmac.digest(self._cache_secret, password.encode(), "sha256"))
        if key in self._verified:
            self._verified.move_to_end(key)
            return LoginAttempt(name, known=True, ok=True)
        return LoginAttempt(name, password, user.password_hash, known=True, cache_key=key, needs_hash=True)

    def token_attempt(self, token: str) -> LoginAttempt:
        """A login with an OAuth 2 token, verified at once on the caller's
        thread (under a millisecond the first time, microseconds once
        remembered: no worker thread as for PBKDF2); the user it names need
        not exist, the token's scopes are its permissions."""
        try:
            grant = self.tokens.verify(token)
        except TokenRefused as e:
            return LoginAttempt(None, refusal=str(e), unknown_key=isinstance(e, UnknownKey))
        return LoginAttempt(grant.user, ok=True, grant=grant)

    @staticmethod
    def verify(attempt: LoginAttempt) -> bool:
        """The slow step; touches no shared state, so any thread may run it."""
        matches = check_password(attempt.password, attempt.stored)
        return matches and attempt.known

    def conclude(self, attempt: LoginAttempt, peer_host: str) -> str | None:
        """The user name once `attempt.ok` holds the verdict, or None."""
        name = attempt.name
        if not attempt.ok or name is None:
            return None
        if attempt.cache_key is not None:
            self._verified[attempt.cache_key] = None
            while len(self._verified) > self.cache_size:
                self._verified.popitem(last=False)
        if attempt.grant is None and name in self.loopback_users and not is_loopback(peer_host):
            return None
        return name

    def dummy_hash(self) -> str:
        """A hash no password matches, at our iteration count: unknown users
        cost the same PBKDF2 as a known user's wrong password."""
        if not self._dummy_hash:  # a random digest: no need to derive one
            self._dummy_hash = f"{SCHEME}${ITERATIONS}${os.urandom(16).hex()}${os.urandom(32).hex()}"
        return self._dummy_hash
