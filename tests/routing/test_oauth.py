"""OAuth 2 tokens checked by routing/oauth.py, with real keys and JWTs
(tests/support/jwt_tokens.py): which tokens are accepted, and what their
scopes grant, read through the same permission checks users get."""

from __future__ import annotations

import hmac
import json
import time

import jwt
import pytest
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from jwt_tokens import Issuer

from routing import permissions, topic_permissions
from routing.oauth import (
    UNKNOWN_USER,
    KeyConfigError,
    TokenRefused,
    TokenVerifier,
    load_keys,
    looks_like_jwt,
)
from routing.oauth_scopes import parse
from routing.users import Authenticator


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture(scope="module")
def verifier(issuer) -> TokenVerifier:
    return TokenVerifier(load_keys(issuer.jwks()))


@pytest.mark.parametrize("kid", ["hmac", "rsa", "ec"])
def test_a_token_signed_by_a_configured_key_is_accepted(issuer, verifier, kid):
    grant = verifier.verify(issuer.token(["rabbitmq.read:*/*", "rabbitmq.tag:management"], kid=kid))
    assert grant.user == "token-user"
    assert grant.tags == ["management"]
    assert grant.expires_at == pytest.approx(time.time() + 300, abs=5)


@pytest.mark.parametrize("token_args, reason", [
    ({"expires_in": -5}, "token expired"),
    ({"audience": "another-service"}, "audience"),
    ({"audience": None}, "audience"),
    ({"sign_with": "stranger"}, "Signature verification failed"),
    ({"kid": "no-such-key"}, "no signing key"),
    ({"kid": None}, "no signing key"),  # no kid and no default key
    ({"nbf": int(time.time()) + 3600}, "not yet valid"),
])  # fmt: skip
def test_refused_tokens_say_why(issuer, verifier, token_args, reason):
    with pytest.raises(TokenRefused, match=reason):
        verifier.verify(issuer.token(**token_args))


def test_a_key_verifies_only_its_own_algorithm(issuer, verifier):
    """HS256 keyed with the RSA public key's PEM (the classic confusion:
    the public key is no secret), and alg none, are both refused."""
    pem = issuer.rsa_key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    header = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "rsa"}).encode())
    payload = b64(json.dumps({"aud": "rabbitmq", "exp": int(time.time()) + 60, "scope": "rabbitmq.read:*/*"}).encode())
    signature = b64(hmac.digest(pem, header + b"." + payload, "sha256"))
    with pytest.raises(TokenRefused, match="alg value is not allowed"):
        verifier.verify((header + b"." + payload + b"." + signature).decode())
    unsigned = jwt.encode({"aud": "rabbitmq", "exp": int(time.time()) + 60}, None, algorithm="none",
                          headers={"kid": "rsa"})  # fmt: skip
    with pytest.raises(TokenRefused, match="alg value is not allowed"):
        verifier.verify(unsigned)


def b64(data: bytes) -> bytes:
    return jwt.utils.base64url_encode(data)


def test_the_default_key_signs_tokens_without_kid(issuer):
    verifier = TokenVerifier(load_keys(issuer.jwks()), default_key="rsa")
    assert verifier.verify(issuer.token(kid=None)).user == "token-user"


def test_audience_is_not_checked_when_verify_aud_is_off(issuer):
    verifier = TokenVerifier(load_keys(issuer.jwks()), verify_aud=False)
    assert verifier.verify(issuer.token(audience="another-service")).user == "token-user"


def test_a_token_that_names_no_user_is_the_unknown_user(issuer, verifier):
    """As RabbitMQ: its client's OAuth example sends tokens without sub."""
    assert verifier.verify(issuer.token(sub=None)).user == UNKNOWN_USER
    assert verifier.verify(issuer.token(sub=None, client_id="svc")).user == "svc"


def test_keys_come_from_a_jwks_file_and_pem_files(issuer, tmp_path):
    pem = tmp_path / "ec.pem"
    pem.write_bytes(issuer.ec_key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo))
    keys = load_keys({"pem-key": str(pem)}, jwks_file=str(issuer.jwks_file(tmp_path / "jwks.json")))
    assert set(keys) == {"hmac", "rsa", "ec", "pem-key"}
    verifier = TokenVerifier(keys)
    assert verifier.verify(issuer.token(kid="hmac")).user == "token-user"
    token = jwt.encode({"aud": "rabbitmq", "exp": int(time.time()) + 60}, issuer.ec_key, algorithm="ES256",
                       headers={"kid": "pem-key"})  # fmt: skip
    assert verifier.verify(token).user == UNKNOWN_USER


@pytest.mark.parametrize("keys, jwks", [
    ({"k": {"kty": "oct"}}, None),  # no key material
    ({"k": "/no/such/file.pem"}, None),
    ({"k": 42}, None),
    ({}, {"not": "jwks"}),
    ({}, {"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}),  # no kid
])  # fmt: skip
def test_keys_that_do_not_load_are_refused_up_front(tmp_path, keys, jwks):
    path = ""
    if jwks is not None:
        path = str(tmp_path / "jwks.json")
        (tmp_path / "jwks.json").write_text(json.dumps(jwks))
    with pytest.raises(KeyConfigError):
        load_keys(keys, jwks_file=path)


def test_private_jwks_are_used_by_their_public_half(issuer):
    private = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(issuer.rsa_key))
    verifier = TokenVerifier(load_keys({"rsa": private}))
    assert verifier.verify(issuer.token()).user == "token-user"


# ---------------------------------------------------------------- scopes


def allowed(scopes: list[str], vhost: str, kind: str, name: str) -> bool:
    try:
        permissions.check(parse(scopes, "rabbitmq.").permission(vhost), "u", vhost, kind, name, "queue")
    except permissions.AccessRefused:
        return False
    return True


def test_scopes_grant_their_kind_on_matching_names_only():
    scopes = ["rabbitmq.read:*/orders-*", "rabbitmq.write:prod/orders", "rabbitmq.configure:%2F/tmp.*"]
    assert allowed(scopes, "/", "read", "orders-eu")
    assert not allowed(scopes, "/", "read", "audit")
    assert not allowed(scopes, "/", "write", "orders")  # write only in prod
    assert allowed(scopes, "prod", "write", "orders")
    assert not allowed(scopes, "prod", "write", "orders-eu")  # a literal, no wildcard
    assert allowed(scopes, "/", "configure", "tmp.1")
    assert not allowed(scopes, "prod", "configure", "tmp.1")  # %2F is the vhost /
    assert not allowed(scopes, "/", "configure", "tmpx1")  # the dot is literal


def test_scope_wildcards_are_not_regular_expressions():
    scopes = ["rabbitmq.read:*/a(b|c)+", "rabbitmq.write:*/.*"]
    assert allowed(scopes, "/", "read", "a(b|c)+")
    assert not allowed(scopes, "/", "read", "abc")
    assert allowed(scopes, "/", "write", ".*")
    assert not allowed(scopes, "/", "write", "anything")


def test_vhost_access_needs_a_scope_naming_it():
    scopes = parse(["rabbitmq.read:dev*/*", "rabbitmq.tag:monitoring", "other.read:*/*", "rabbitmq.bogus:x/y"],
                   "rabbitmq.")  # fmt: skip
    assert scopes.permission("dev-1") is not None
    assert scopes.permission("/") is None
    assert scopes.tags == ("monitoring",)


def test_the_default_exchange_is_amq_default_as_for_users():
    assert allowed(["rabbitmq.write:*/amq.default"], "/", "write", "")
    assert not allowed(["rabbitmq.write:*/q"], "/", "write", "")


def test_a_topic_scope_applies_its_vhost_and_exchange():
    assert allowed(["rabbitmq.write:*/amq.topic/orders.*"], "/", "write", "amq.topic")


def topic(scopes: list[str], kind: str, key: str, exchange: str = "amq.topic", vhost: str = "/") -> bool:
    return parse(scopes, "rabbitmq.").topic_allowed(kind, vhost, exchange, key)


def test_a_topic_scope_covers_the_routing_keys_its_pattern_matches():
    scopes = ["rabbitmq.write:%2F/amq.topic/orders.*"]
    assert topic(scopes, "write", "orders.eu")
    assert topic(scopes, "write", "orders.eu.paris")  # `*` is any run of characters, dots included
    assert not topic(scopes, "write", "invoices.eu")
    assert not topic(scopes, "read", "orders.eu")  # the kind must match
    assert not topic(scopes, "write", "orders.eu", exchange="events")
    assert not topic(scopes, "write", "orders.eu", vhost="dev")


def test_a_routing_key_pattern_is_matched_whole_and_literally():
    assert topic(["rabbitmq.read:*/*/a.b"], "read", "a.b")
    assert not topic(["rabbitmq.read:*/*/a.b"], "read", "axb")  # `.` is no regex
    assert not topic(["rabbitmq.read:*/*/a.b"], "read", "a.b.c")
    assert topic(["rabbitmq.read:*/*/%2A"], "read", "*")  # percent-encoded: a literal star
    assert not topic(["rabbitmq.read:*/*/%2A"], "read", "x")


def test_a_two_part_scope_grants_no_topic_access():
    """As RabbitMQ's OAuth 2 backend: only a scope with a routing key part
    is a topic scope, so `write:*/*` alone cannot publish to a topic exchange."""
    assert allowed(["rabbitmq.write:*/*"], "/", "write", "amq.topic")
    assert not topic(["rabbitmq.write:*/*"], "write", "anything")
    assert topic(["rabbitmq.write:*/*/*"], "write", "anything")


def test_topic_permissions_check_a_tokens_scopes_instead_of_the_users_entries():
    scopes = parse(["rabbitmq.write:*/amq.topic/orders.*"], "rabbitmq.")
    unrestricted: dict = {}  # a user without entries would pass
    topic_permissions.check(unrestricted, "svc", "/", "amq.topic", "orders.eu", "write", scopes=scopes)
    with pytest.raises(permissions.AccessRefused, match="write access to topic 'invoices' in exchange 'amq.topic'"):
        topic_permissions.check(unrestricted, "svc", "/", "amq.topic", "invoices", "write", scopes=scopes)
    topic_permissions.check(unrestricted, "svc", "/", "amq.topic", "invoices", "write")  # no token: no entry, allowed


# ---------------------------------------------------------------- logins


def plain(password: str, user: str = "ignored") -> bytes:
    return b"\0" + user.encode() + b"\0" + password.encode()


def test_a_token_as_the_plain_password_logs_in_as_its_subject(issuer, verifier):
    auth = Authenticator(None, ["guest"])
    auth.tokens = verifier
    attempt = auth.plan("PLAIN", plain(issuer.token()))
    assert attempt.ok and attempt.grant is not None and not attempt.needs_hash
    assert auth.conclude(attempt, "10.0.0.1") == "token-user"
    refused = auth.plan("PLAIN", plain(issuer.token(expires_in=-5)))
    assert not refused.ok and refused.refusal == "token expired"
    assert auth.conclude(refused, "127.0.0.1") is None


def test_without_a_verifier_a_token_is_just_a_wrong_password(issuer):
    auth = Authenticator(None, [])
    assert auth.authenticate("PLAIN", plain(issuer.token()), "127.0.0.1") is None


def test_passwords_that_are_not_jwts_go_to_the_users(issuer, verifier):
    auth = Authenticator(None, [])
    auth.tokens = verifier
    auth.add_user("alice", "a.b.c")
    assert not looks_like_jwt("a.b.c")
    assert looks_like_jwt(issuer.token())
    assert auth.authenticate("PLAIN", plain("a.b.c", "alice"), "10.0.0.1") == "alice"


# ---------------------------------------------------------------- the cache of accepted tokens


def test_an_accepted_token_is_remembered_until_it_expires(issuer):
    verifier = TokenVerifier(load_keys(issuer.jwks()))
    token = issuer.token(expires_in=1)
    first = verifier.verify(token)
    assert verifier.verify(token) is first  # from the cache: not parsed again
    time.sleep(max(0.0, first.expires_at - time.time()) + 0.01)  # the token's own deadline, on the wall clock
    with pytest.raises(TokenRefused, match="token expired"):
        verifier.verify(token)


def test_the_cache_is_bounded_and_forgotten_when_keys_are_reloaded(issuer):
    keys = load_keys(issuer.jwks())
    current = {"keys": keys}
    verifier = TokenVerifier(keys, reload=lambda: current["keys"], cache_size=2)
    tokens = [issuer.token(sub=f"u{i}") for i in range(3)]
    for token in tokens:
        verifier.verify(token)
    assert len(verifier._accepted) == 2
    current["keys"] = {kid: key for kid, key in keys.items() if kid != "rsa"}  # the provider dropped "rsa"
    assert verifier.claim_reload() and verifier.reload_keys()
    with pytest.raises(TokenRefused, match="no signing key"):
        verifier.verify(tokens[2])
