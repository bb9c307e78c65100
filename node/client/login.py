"""Logins off the event loop, for AMQP SASL and HTTP basic auth alike.

PBKDF2 costs tens of milliseconds on purpose; run on the loop, a client
guessing passwords stalls every other connection. Here it runs in a small
thread pool (hashlib releases the GIL), the number of logins waiting for it
is bounded, and an address whose logins fail waits longer before each next
try (`FailureDelays`).
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from node.client.auth_attempts import AuthAttempts
from routing.oauth import Grant
from routing.users import Authenticator, hash_password

log = logging.getLogger("warren.login")


class LoginsBusy(Exception):
    """Too many logins already wait for a hash check; try again later."""


@dataclass
class _Failures:
    count: int
    next_at: float  # the earliest time the address's next login is checked


class FailureDelays:
    """A delay before each login from an address whose logins failed: `base`
    seconds after one failure, doubling per further failure up to `cap`.
    An address quiet for `cap` seconds past its last wait is forgotten, and at
    most `max_addresses` are remembered (least recently failing go first).
    IPv6 peers count per /64, the block one subscriber usually holds."""

    def __init__(self, base: float, cap: float, max_addresses: int, clock: Callable[[], float] = time.monotonic):
        self.base, self.cap, self.max_addresses, self.clock = base, cap, max_addresses, clock
        self._by_address: OrderedDict[str, _Failures] = OrderedDict()

    def wait(self, peer: str) -> float:
        """Seconds the next login from `peer` waits; reserves its turn, so
        concurrent tries from one address are spaced out, not bunched."""
        key, now = source_key(peer), self.clock()
        entry = self._by_address.get(key)
        if entry is None:
            return 0.0
        if now > entry.next_at + self.cap:
            del self._by_address[key]
            return 0.0
        start = max(now, entry.next_at)
        entry.next_at = start + self.delay(entry.count)
        return start - now

    def failed(self, peer: str) -> None:
        key, now = source_key(peer), self.clock()
        entry = self._by_address.pop(key, None)
        if entry is None:
            entry = _Failures(0, now)
        entry.count += 1
        entry.next_at = max(entry.next_at, now + self.delay(entry.count))
        self._by_address[key] = entry
        while len(self._by_address) > self.max_addresses:
            self._by_address.popitem(last=False)

    def delay(self, failures: int) -> float:
        if failures <= 0 or self.base <= 0:
            return 0.0
        return min(self.cap, self.base * 2 ** min(failures - 1, 62))

    def __len__(self) -> int:
        return len(self._by_address)


def source_key(peer: str) -> str:
    try:
        ip = ipaddress.ip_address(peer.split("%")[0])
    except ValueError:
        return peer
    if ip.version == 6:
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


class LoginService:
    """The node's logins: `await login(...)` gives the user name or None."""

    def __init__(self, auth: Authenticator, workers: int, max_pending: int, delays: FailureDelays,
                 attempts: AuthAttempts | None = None):  # fmt: skip
        self.auth = auth
        self.max_pending = max_pending
        self.delays = delays
        self._executor = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="warren-login")
        self.pending = 0  # logins between arrival and verdict (delayed or hashing)
        self.hashing = 0  # of which waiting for or running PBKDF2
        self.delayed = 0  # logins that waited because of earlier failures (a counter)
        self.refused_busy = 0  # logins refused because max_pending were already waiting
        # verdicts by protocol ("amqp10", "http"), and by source when tracked
        self.attempts = attempts if attempts is not None else AuthAttempts()

    async def login(self, mechanism: str, response: bytes | None, peer: str, external: str | None = None) -> str | None:
        """The user name, or None when refused. Raises LoginsBusy when
        `max_pending` logins are already in progress. `external`: the user a
        verified client certificate names (SASL EXTERNAL, node/client/tls.py)."""
        return (await self.login_grant(mechanism, response, peer, external))[0]

    async def login_grant(self, mechanism: str, response: bytes | None, peer: str, external: str | None = None,
                          protocol: str = "amqp10") -> tuple[str | None, Grant | None]:  # fmt: skip
        """As `login`, with the grant of an OAuth 2 token when the password
        was one (routing/oauth.py): its scopes, not a user's entries, are then
        the connection's permissions, until it expires. `protocol` counts the
        verdict (RabbitMQ's auth attempt label: "amqp10", "http")."""
        if self.pending >= self.max_pending:
            self.refused_busy += 1
            raise LoginsBusy(f"{self.pending} logins in progress")
        self.pending += 1
        try:
            attempt = self.auth.plan(mechanism, response, external)
            if attempt.unknown_key and await self.reload_token_keys():  # a key the provider just added?
                attempt = self.auth.plan(mechanism, response, external)
            if attempt.needs_hash:
                # Only a login that must be hashed waits: one the cache already
                # verified proves nothing new, and a client reconnecting with the
                # right password from an address others abuse (NAT) is not held.
                wait = self.delays.wait(peer)
                if wait > 0:
                    self.delayed += 1
                    await asyncio.sleep(wait)
                self.hashing += 1
                try:
                    attempt.ok = await asyncio.get_running_loop().run_in_executor(self._executor, self.auth.verify,
                                                                                  attempt)  # fmt: skip
                finally:
                    self.hashing -= 1
            name = self.auth.conclude(attempt, peer)
        finally:
            self.pending -= 1
        self.attempts.record(protocol, name is not None, peer, attempt.name or "")
        if name is None:
            if attempt.refusal:
                log.info("token refused from %s: %s", peer, attempt.refusal)
            self.delays.failed(peer)
        return name, attempt.grant if name is not None else None

    async def reload_token_keys(self) -> bool:
        """Reads the OAuth signing keys again (routing/oauth.py), off the loop
        and not in the hashing pool: a slow provider must not hold up logins
        with passwords. False when not allowed yet or nothing changed."""
        tokens = self.auth.tokens
        if tokens is None or not tokens.claim_reload():
            return False
        return await asyncio.get_running_loop().run_in_executor(None, tokens.reload_keys)

    async def hash_password(self, password: str) -> str:
        """A new stored hash for `password` (the node's password_hashing_module),
        computed off the loop as well."""
        hashing = functools.partial(hash_password, algorithm=self.auth.password_hashing)
        return await asyncio.get_running_loop().run_in_executor(self._executor, hashing, password)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
