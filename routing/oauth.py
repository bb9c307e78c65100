"""OAuth 2 access tokens (JWTs) as credentials, as RabbitMQ's
auth_backend_oauth2 takes them: the token is the SASL PLAIN password (the
user name is ignored) or an HTTP `Authorization: Bearer` header.

A token is accepted when its signature verifies with one of the configured
keys, chosen by the token header's `kid` (or the default key when it has
none), its `aud` names the resource server id (RabbitMQ's `verify_aud`), and
it is within `nbf` .. `exp`. Keys are JWKs (RFC 7517) by key id: symmetric
(`kty: oct`, HS256), RSA (RS256) and EC (ES256) public keys, given inline,
as PEM public key files, or as a JWKS document (a file, or a URL read when
the node starts). A key only verifies the algorithm it is for: a token
whose header names another (`none`, HS256 with an RSA key's bytes as the
secret) is refused.

What it grants is its scopes (routing/oauth_scopes.py). Pure: no I/O
except reading the key files (and the JWKS URL) when the verifier is made.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
import urllib.request
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from routing import oauth_scopes
from routing.oauth_scopes import Scopes
from routing.permissions import Permission

log = logging.getLogger("warren.oauth")

USER_CLAIMS = ("sub", "client_id")  # the user a token names: the first present (RabbitMQ's default)
UNKNOWN_USER = "unknown"  # RabbitMQ's name for a token that names none (its clients' examples send such tokens)
EC_ALGORITHMS = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
JWKS_FETCH_TIMEOUT = 10.0  # seconds


class TokenRefused(Exception):
    """The token is not accepted; the message says why (never the token)."""


class UnknownKey(TokenRefused):
    """The token names a key the node does not have (yet: see TokenVerifier.reload_keys)."""


class KeyConfigError(ValueError):
    """A signing key that cannot be loaded: the node does not start with it."""


@dataclass(frozen=True)
class SigningKey:
    key: Any  # what PyJWT verifies with: bytes (HMAC) or a cryptography public key
    algorithms: tuple[str, ...]


@dataclass(frozen=True)
class Grant:
    """What an accepted token stands for, until `expires_at` (Unix time; None: no `exp`)."""

    user: str
    expires_at: float | None
    scopes: Scopes = field(default_factory=Scopes)

    @property
    def tags(self) -> list[str]:
        return list(self.scopes.tags)

    def permission(self, vhost: str) -> Permission | None:
        return self.scopes.permission(vhost)


@dataclass
class TokenUser:
    """A user of the HTTP API who authenticated with a token: a name and
    tags like routing.users.User, and the grant its permissions come from."""

    name: str
    tags: list[str]
    grant: Grant


class TokenVerifier:
    """Checks tokens against `keys`. With `reload` (a function reading the
    keys again: the JWKS URL or file), a token naming a key not yet known
    makes the caller read them again, so an identity provider's new key is
    taken without a restart; at most once per `reload_interval` seconds,
    so tokens naming made-up keys cannot make the node hammer the provider."""

    def __init__(self, keys: dict[str, SigningKey], resource_server_id: str = "rabbitmq", default_key: str = "",
                 scope_prefix: str | None = None, verify_aud: bool = True,
                 reload: Callable[[], dict[str, SigningKey]] | None = None, reload_interval: float = 10.0,
                 cache_size: int = 10_000):  # fmt: skip
        self.keys = keys
        self.resource_server_id = resource_server_id
        self.default_key = default_key
        self.scope_prefix = resource_server_id + "." if scope_prefix is None else scope_prefix
        self.verify_aud = verify_aud
        self.reload = reload
        self.reload_interval = reload_interval
        self._last_reload = -math.inf
        self.reloads = 0  # times the keys were read again
        # PyJWT takes ~150 us a token, mostly parsing; clients reconnect and
        # HTTP clients send each request with the same token. Accepted tokens
        # are remembered until they expire, by their SHA-256 (the bearer
        # credential itself is not kept); least recently used go first.
        self._accepted: OrderedDict[bytes, Grant] = OrderedDict()
        self.cache_size = cache_size

    def claim_reload(self) -> bool:
        """True if the keys may be read again now; the caller then runs
        `reload_keys` (blocking I/O: off the event loop)."""
        now = time.monotonic()
        if self.reload is None or now - self._last_reload < self.reload_interval:
            return False
        self._last_reload = now
        return True

    def reload_keys(self) -> bool:
        """Reads the keys again; those that no longer load leave the current ones."""
        try:
            keys = self.reload()
        except KeyConfigError as e:
            log.warning("OAuth signing keys not reloaded: %s", e)
            return False
        self.keys = keys
        self._accepted.clear()  # a key may have gone: tokens it signed are checked again
        self.reloads += 1
        return True

    def verify(self, token: str) -> Grant:
        """The grant of a valid token; raises TokenRefused otherwise."""
        digest = hashlib.sha256(token.encode()).digest()
        grant = self._accepted.get(digest)
        if grant is not None:
            if grant.expires_at is not None and grant.expires_at <= time.time():
                del self._accepted[digest]
                raise TokenRefused("token expired")
            self._accepted.move_to_end(digest)
            return grant
        grant = self._check(token)
        if self.cache_size > 0:
            self._accepted[digest] = grant
            while len(self._accepted) > self.cache_size:
                self._accepted.popitem(last=False)
        return grant

    def _check(self, token: str) -> Grant:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenRefused("not a JWT") from None
        kid = header.get("kid") or self.default_key
        key = self.keys.get(kid) if isinstance(kid, str) else None
        if key is None:
            raise UnknownKey(f"no signing key with id {kid!r}")
        try:
            claims = jwt.decode(token, key.key, algorithms=list(key.algorithms),
                                audience=self.resource_server_id if self.verify_aud else None,
                                options={"verify_aud": self.verify_aud})  # fmt: skip
        except jwt.ExpiredSignatureError:
            raise TokenRefused("token expired") from None
        except (jwt.InvalidAudienceError, jwt.MissingRequiredClaimError) as e:
            raise TokenRefused(f"audience: {e}") from None
        except jwt.PyJWTError as e:
            raise TokenRefused(str(e) or type(e).__name__) from None
        user = next((claims[c] for c in USER_CLAIMS if isinstance(claims.get(c), str) and claims[c]), UNKNOWN_USER)
        exp = claims.get("exp")
        return Grant(user, float(exp) if exp is not None else None,
                     oauth_scopes.parse(scope_list(claims.get("scope")), self.scope_prefix))  # fmt: skip


def scope_list(claim: Any) -> list[str]:
    """The `scope` claim: a space-separated string (RFC 8693) or a list."""
    if isinstance(claim, str):
        return claim.split()
    if isinstance(claim, list):
        return [s for s in claim if isinstance(s, str)]
    return []


def looks_like_jwt(password: str) -> bool:
    """Whether a password is a JWT (a JSON header that names an algorithm):
    such a password is checked as a token, any other as a user's password."""
    if password.count(".") != 2:
        return False
    try:
        return "alg" in jwt.get_unverified_header(password)
    except jwt.PyJWTError:
        return False


# ---------------------------------------------------------------- keys


def load_keys(signing_keys: dict[str, Any], jwks_file: str = "", jwks_url: str = "") -> dict[str, SigningKey]:
    """Keys by id: `signing_keys` maps an id to a JWK (a table) or to a PEM
    public key file; a JWKS file's and URL's keys are named by their `kid`
    (an inline key of the same id wins). Raises KeyConfigError."""
    keys: dict[str, SigningKey] = {}
    for source, document in (("jwks_url", _fetch(jwks_url) if jwks_url else None),
                             ("jwks_file", _read_json(jwks_file) if jwks_file else None)):  # fmt: skip
        if document is None:
            continue
        if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
            raise KeyConfigError(f"{source}: not a JWKS document (an object with a 'keys' list)")
        for jwk in document["keys"]:
            kid = jwk.get("kid") if isinstance(jwk, dict) else None
            if not isinstance(kid, str) or not kid:
                raise KeyConfigError(f"{source}: a key without 'kid'")
            keys[kid] = from_jwk(jwk, f"{source} key {kid!r}")
    for kid, value in signing_keys.items():
        if isinstance(value, dict):
            keys[kid] = from_jwk(value, f"signing key {kid!r}")
        elif isinstance(value, str):
            keys[kid] = from_pem_file(value, f"signing key {kid!r}")
        else:
            raise KeyConfigError(f"signing key {kid!r}: a JWK table or a PEM file path is expected")
    return keys


def from_jwk(jwk: dict, what: str) -> SigningKey:
    try:
        parsed = jwt.PyJWK(jwk)
    except (jwt.PyJWTError, ValueError, TypeError, KeyError) as e:
        raise KeyConfigError(f"{what}: {e}") from None
    key = parsed.key
    if isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
        key = key.public_key()  # verifying needs only the public half
    return SigningKey(key, (parsed.algorithm_name,))


def from_pem_file(path: str, what: str) -> SigningKey:
    try:
        with open(path, "rb") as f:
            key = load_pem_public_key(f.read())
    except (OSError, ValueError) as e:
        raise KeyConfigError(f"{what}: {path}: {e}") from None
    if isinstance(key, rsa.RSAPublicKey):
        return SigningKey(key, ("RS256", "RS384", "RS512"))
    if isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name in EC_ALGORITHMS:
        return SigningKey(key, (EC_ALGORITHMS[key.curve.name],))
    raise KeyConfigError(f"{what}: {path}: an RSA or EC (P-256, P-384, P-521) public key is expected")


def _read_json(path: str) -> Any:
    try:
        with open(path, "rb") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise KeyConfigError(f"jwks_file {path}: {e}") from None


def _fetch(url: str) -> Any:
    """The JWKS at `url`, read once when the node starts."""
    try:
        with urllib.request.urlopen(url, timeout=JWKS_FETCH_TIMEOUT) as response:  # noqa: S310 (an operator's URL)
            return json.loads(response.read())
    except (OSError, ValueError) as e:
        raise KeyConfigError(f"jwks_url {url}: {e}") from None
