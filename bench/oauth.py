"""OAuth 2 token checks per second (routing/oauth.py): what a login or an
HTTP request with a token costs the event loop, per signing algorithm,
beside a password login the cache answers and one that runs PBKDF2 (which
the node runs in a worker thread, not on the loop).

    .venv/bin/python bench/oauth.py [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from routing.oauth import TokenVerifier, load_keys  # noqa: E402
from routing.users import Authenticator  # noqa: E402

SCOPES = ["rabbitmq.configure:*/*", "rabbitmq.write:*/*", "rabbitmq.read:*/*", "rabbitmq.tag:management"]


def rate(fn, seconds: float) -> float:
    n, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        for _ in range(50):
            fn()
        n += 50
    return n / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    secret = b"a benchmark secret of at least thirty-two bytes"
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    keys = load_keys({
        "hmac": {"kty": "oct", "k": jwt.utils.base64url_encode(secret).decode(), "alg": "HS256"},
        "rsa": json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(rsa_key.public_key())),
        "ec": json.loads(jwt.algorithms.ECAlgorithm.to_jwk(ec_key.public_key())),
    })  # fmt: skip
    claims = {"sub": "bench", "aud": "rabbitmq", "exp": int(time.time()) + 3600, "scope": SCOPES}
    print(f"{'check':<40} {'per second':>12} {'us each':>9}")
    for kid, alg, key in (("hmac", "HS256", secret), ("rsa", "RS256", rsa_key), ("ec", "ES256", ec_key)):
        token = jwt.encode(claims, key, algorithm=alg, headers={"kid": kid})
        for label, verifier in (("first seen", TokenVerifier(keys, cache_size=0)), ("seen before", TokenVerifier(keys))):
            r = rate(lambda t=token, v=verifier: v.verify(t).permission("/"), args.seconds)
            print(f"{'token ' + alg + ', ' + label + ' (+ scopes)':<40} {r:>12,.0f} {1e6 / r:>9.1f}")
    auth = Authenticator(None, [])
    auth.add_user("bench", "secret")
    plain = b"\0bench\0secret"
    auth.authenticate("PLAIN", plain, "127.0.0.1")  # now cached
    r = rate(lambda: auth.authenticate("PLAIN", plain, "127.0.0.1"), args.seconds)
    print(f"{'password, cached':<40} {r:>12,.0f} {1e6 / r:>9.1f}")
    attempt = auth.plan("PLAIN", b"\0bench\0wrong")
    r = rate(lambda: auth.verify(attempt), args.seconds) if args.seconds >= 1 else 0.0
    if r:
        print(f"{'password, PBKDF2 (worker thread)':<40} {r:>12,.0f} {1e6 / r:>9.1f}")


if __name__ == "__main__":
    main()
