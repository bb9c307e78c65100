"""Password hashes exported by RabbitMQ, verified as they are.

RabbitMQ's internal users store base64(salt + H(salt + password)) with a
4-byte random salt and H = SHA-256 (rabbit_password_hashing_sha256, the
default) or SHA-512 (rabbit_password_hashing_sha512); see "Credentials and
Passwords", "Computing Password Hash" in its documentation. Warren keeps such
a hash as "rabbit-sha256$<base64>" (or rabbit-sha512) until the user's
password changes, and exports it as RabbitMQ wrote it: a user imported from
RabbitMQ still logs in there after Warren exports it (docs/security.md says
why the hash is not upgraded at login).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os

__all__ = ["ALGORITHMS", "PREFIXES", "check", "export", "hash_password", "is_rabbit_hash", "stored_form"]

SALT_LENGTH = 4
# RabbitMQ's hashing_algorithm name -> (Warren's prefix, hash function)
ALGORITHMS = {
    "rabbit_password_hashing_sha256": ("rabbit-sha256$", hashlib.sha256),
    "rabbit_password_hashing_sha512": ("rabbit-sha512$", hashlib.sha512),
}
PREFIXES = tuple(prefix for prefix, _ in ALGORITHMS.values())


def is_rabbit_hash(stored: str) -> bool:
    return stored.startswith(PREFIXES)


def stored_form(algorithm: str, password_hash: str) -> str:
    """How Warren stores a hash RabbitMQ exported; ValueError if it is not
    one of the supported algorithms or not a well-formed hash."""
    entry = ALGORITHMS.get(algorithm)
    if entry is None:
        raise ValueError(f"unsupported hashing_algorithm {algorithm!r}")
    prefix, fn = entry
    if password_hash == "":  # a user without a password (it cannot log in with one)
        return ""
    raw = _decode(password_hash)
    if raw is None or len(raw) != SALT_LENGTH + fn().digest_size:
        raise ValueError(f"password_hash is not a {algorithm} hash")
    return prefix + password_hash


def hash_password(algorithm: str, password: str, salt: bytes | None = None) -> str:
    """A new hash of `password` in RabbitMQ's format, as Warren stores it (for
    the setting password_hashing_module = rabbit_password_hashing_sha256/512)."""
    prefix, fn = ALGORITHMS[algorithm]
    salt = os.urandom(SALT_LENGTH) if salt is None else salt
    return prefix + base64.b64encode(salt + fn(salt + password.encode()).digest()).decode()


def export(stored: str) -> tuple[str, str] | None:
    """(hashing_algorithm, password_hash) as RabbitMQ writes them, for a hash
    kept in RabbitMQ's format; None for any other."""
    for algorithm, (prefix, _) in ALGORITHMS.items():
        if stored.startswith(prefix):
            return algorithm, stored[len(prefix) :]
    return None


def check(password: str, stored: str) -> bool:
    for prefix, fn in ALGORITHMS.values():
        if stored.startswith(prefix):
            raw = _decode(stored[len(prefix) :])
            if raw is None or len(raw) != SALT_LENGTH + fn().digest_size:
                return False
            salt, digest = raw[:SALT_LENGTH], raw[SALT_LENGTH:]
            return hmac.compare_digest(fn(salt + password.encode()).digest(), digest)
    return False


def _decode(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
