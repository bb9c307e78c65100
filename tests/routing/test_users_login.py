"""The Authenticator's login steps: the same PBKDF2 for an unknown user as
for a known user's wrong password (no username oracle), and a bounded cache
that never holds a plaintext password."""

from __future__ import annotations

import hashlib

import pytest

from routing.users import ITERATIONS, Authenticator


@pytest.fixture
def derivations(monkeypatch):
    """Every PBKDF2 run from now on, as (password, salt, iterations)."""
    calls: list[tuple[bytes, bytes, int]] = []
    real = hashlib.pbkdf2_hmac

    def counting(name: str, password: bytes, salt: bytes, iterations: int, *rest) -> bytes:
        calls.append((password, salt, iterations))
        return real(name, password, salt, iterations, *rest)

    monkeypatch.setattr(hashlib, "pbkdf2_hmac", counting)
    return calls


@pytest.fixture
def auth():
    a = Authenticator(anonymous_user=None, loopback_users=[])
    a.add_user("alice", "secret")
    a.add_user("nopass", None)  # a user without a password cannot log in with one
    return a


def test_unknown_user_runs_the_same_hash_as_a_wrong_password(auth, derivations):
    assert auth.authenticate("PLAIN", b"\0alice\0wrong", "192.0.2.1") is None
    assert auth.authenticate("PLAIN", b"\0mallory\0wrong", "192.0.2.1") is None
    assert auth.authenticate("PLAIN", b"\0nopass\0wrong", "192.0.2.1") is None
    assert [c[2] for c in derivations] == [ITERATIONS, ITERATIONS, ITERATIONS]
    # the unknown users were checked against the dummy hash, with its salt
    dummy_salt = bytes.fromhex(auth.dummy_hash().split("$")[2])
    assert derivations[1][1] == derivations[2][1] == dummy_salt


def test_an_unknown_user_never_matches_even_the_dummy_password(auth):
    attempt = auth.plan("PLAIN", b"\0mallory\0x")
    assert attempt.needs_hash and not attempt.known
    attempt.password = "anything"
    assert not auth.verify(attempt)


def test_failures_are_not_cached(auth, derivations):
    for _ in range(3):
        assert auth.authenticate("PLAIN", b"\0alice\0wrong", "192.0.2.1") is None
        assert auth.authenticate("PLAIN", b"\0mallory\0wrong", "192.0.2.1") is None
    assert len(derivations) == 6


def test_a_success_is_cached_without_the_plaintext(auth, derivations):
    assert auth.authenticate("PLAIN", b"\0alice\0secret", "192.0.2.1") == "alice"
    assert auth.authenticate("PLAIN", b"\0alice\0secret", "192.0.2.1") == "alice"
    assert len(derivations) == 1
    for key in auth._verified:
        assert "secret" not in key and b"secret" not in key
        assert key[1] == auth.users["alice"].password_hash


def test_a_changed_password_misses_the_cache(auth):
    assert auth.authenticate("PLAIN", b"\0alice\0secret", "192.0.2.1") == "alice"
    auth.add_user("alice", "other")
    assert auth.authenticate("PLAIN", b"\0alice\0secret", "192.0.2.1") is None
    assert auth.authenticate("PLAIN", b"\0alice\0other", "192.0.2.1") == "alice"


def test_the_cache_is_bounded_and_keeps_the_recently_used(derivations):
    auth = Authenticator(anonymous_user=None, loopback_users=[], cache_size=3)
    for i in range(5):
        auth.add_user(f"u{i}", f"p{i}")
    auth.authenticate("PLAIN", b"\0u0\0p0", "h")
    for i in range(1, 5):
        auth.authenticate("PLAIN", b"\0u0\0p0", "h")  # u0 stays recent
        auth.authenticate("PLAIN", f"\0u{i}\0p{i}".encode(), "h")
    assert len(auth._verified) == 3
    before = len(derivations)
    assert auth.authenticate("PLAIN", b"\0u0\0p0", "h") == "u0"
    assert len(derivations) == before  # still cached
