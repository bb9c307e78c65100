"""OAuth 2 tokens for tests: keys made here with cryptography (an HS256
secret, an RSA and a P-256 key, and an RSA key the node does not know), the
node settings that trust them, and signed JWTs (PyJWT) with chosen scopes,
audience and expiry."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

AUDIENCE = "rabbitmq"
ALL = ["rabbitmq.configure:*/*", "rabbitmq.write:*/*", "rabbitmq.read:*/*"]


def _rsa() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@dataclass
class Issuer:
    """Signs tokens with the keys the node trusts (`settings()`), by key id:
    "hmac" (HS256), "rsa" (RS256), "ec" (ES256)."""

    secret: bytes = b"a test secret of at least thirty-two bytes!"
    rsa_key: rsa.RSAPrivateKey = field(default_factory=_rsa)
    ec_key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    stranger: rsa.RSAPrivateKey = field(default_factory=_rsa)  # a key the node does not know

    def jwks(self) -> dict[str, dict]:
        """The public JWKs by key id, as oauth_signing_keys takes them."""
        return {
            "hmac": {"kty": "oct", "k": jwt.utils.base64url_encode(self.secret).decode(), "alg": "HS256"},
            "rsa": json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.rsa_key.public_key())),
            "ec": json.loads(jwt.algorithms.ECAlgorithm.to_jwk(self.ec_key.public_key())),
        }

    def settings(self, **overrides: Any) -> dict:
        out = {"oauth_enabled": True, "oauth_signing_keys": self.jwks()}
        out.update(overrides)
        return out

    def jwks_file(self, path: Path) -> Path:
        """A JWKS document of the same keys, each with its kid."""
        path.write_text(json.dumps({"keys": [dict(jwk, kid=kid) for kid, jwk in self.jwks().items()]}))
        return path

    def token(self, scopes: list[str] | str | None = None, kid: str | None = "rsa", expires_in: float = 300,
              audience: str | list[str] | None = AUDIENCE, sub: str | None = "token-user", sign_with: Any = None,
              send_kid: bool = True, **claims: Any) -> str:  # fmt: skip
        """A signed token; `sign_with` ("stranger", or a key) overrides the key
        `kid` names; without `send_kid` the header names no key."""
        payload: dict[str, Any] = {"iss": "warren-tests", "exp": int(time.time() + expires_in),
                                   "scope": ALL if scopes is None else scopes}  # fmt: skip
        if audience is not None:
            payload["aud"] = audience
        if sub is not None:
            payload["sub"] = sub
        payload.update(claims)
        algorithm, key = {"hmac": ("HS256", self.secret), "rsa": ("RS256", self.rsa_key),
                          "ec": ("ES256", self.ec_key), None: ("RS256", self.rsa_key)}.get(kid, ("RS256", self.rsa_key))  # fmt: skip
        if sign_with == "stranger":
            key = self.stranger
        elif sign_with is not None:
            key = sign_with
            algorithm = "ES256" if isinstance(key, ec.EllipticCurvePrivateKey) else "RS256"
        headers = {"kid": kid} if kid is not None and send_kid else {}
        return jwt.encode(payload, key, algorithm=algorithm, headers=headers)
