"""RabbitMQ's exported password hashes, verified as they are."""

from __future__ import annotations

import base64
import hashlib

import pytest

from routing import rabbit_passwords
from routing.users import Authenticator, check_password, hash_password

# The worked example of RabbitMQ's "Computing Password Hash": salt 908DC60A, password "test12".
SHA256_EXAMPLE = "kI3GCqW5JLMJa4iX1lo7X4D6XbYqlLgxIs30+P6tENUV2POR"


def rabbit_sha512(salt: bytes, password: str) -> str:
    return base64.b64encode(salt + hashlib.sha512(salt + password.encode()).digest()).decode()


def test_the_documented_sha256_example_verifies():
    stored = rabbit_passwords.stored_form("rabbit_password_hashing_sha256", SHA256_EXAMPLE)
    assert check_password("test12", stored)
    assert not check_password("test13", stored)
    assert rabbit_passwords.export(stored) == ("rabbit_password_hashing_sha256", SHA256_EXAMPLE)


def test_sha512_hashes_verify():
    stored = rabbit_passwords.stored_form("rabbit_password_hashing_sha512", rabbit_sha512(b"\x01\x02\x03\x04", "pw"))
    assert check_password("pw", stored) and not check_password("pW", stored)


def test_malformed_or_unknown_hashes_are_refused():
    for algorithm, value in (("rabbit_password_hashing_md5", SHA256_EXAMPLE),
                             ("rabbit_password_hashing_sha256", "not base64!"),
                             ("rabbit_password_hashing_sha512", SHA256_EXAMPLE)):  # fmt: skip
        with pytest.raises(ValueError):
            rabbit_passwords.stored_form(algorithm, value)
    assert not check_password("test12", "rabbit-sha256$AAAA")


def test_a_rabbit_hash_costs_a_pbkdf2_like_an_unknown_user(monkeypatch):
    # a SHA-256 check alone answers in microseconds, an unknown user's dummy PBKDF2 in ~24 ms
    from routing import users

    calls = []
    real = users.derive
    monkeypatch.setattr(users, "derive", lambda *args: calls.append(args[2]) or real(*args))
    assert check_password("test12", "rabbit-sha256$" + SHA256_EXAMPLE)
    assert not check_password("wrong", "rabbit-sha256$" + SHA256_EXAMPLE)
    assert calls == [users.ITERATIONS, users.ITERATIONS]


def test_a_rabbit_hash_is_kept_after_a_login():
    # kept until the password changes, so an export still logs in on RabbitMQ (docs/security.md)
    auth = Authenticator(None, [])
    stored = "rabbit-sha256$" + SHA256_EXAMPLE
    auth.add_user("alice", None, [], password_hash=stored)
    assert auth.authenticate("PLAIN", b"\0alice\0wrong", "127.0.0.1") is None
    assert auth.authenticate("PLAIN", b"\0alice\0test12", "127.0.0.1") == "alice"
    assert auth.authenticate("PLAIN", b"\0alice\0test12", "127.0.0.1") == "alice"  # cached
    assert auth.users["alice"].password_hash == stored


def test_new_hashes_in_rabbitmqs_format():
    # RabbitMQ's worked example again: salt 908DC60A, password "test12"
    assert hash_password("test12", bytes.fromhex("908DC60A"), "rabbit_password_hashing_sha256") == (
        "rabbit-sha256$" + SHA256_EXAMPLE)  # fmt: skip
    stored = hash_password("pw", algorithm="rabbit_password_hashing_sha512")
    assert stored.startswith("rabbit-sha512$") and check_password("pw", stored) and not check_password("x", stored)
    auth = Authenticator(None, [])
    auth.password_hashing = "rabbit_password_hashing_sha256"
    auth.add_user("carol", "pw", [])
    assert auth.users["carol"].password_hash.startswith("rabbit-sha256$")
