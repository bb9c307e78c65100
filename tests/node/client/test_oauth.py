"""OAuth 2 tokens over AMQP (routing/oauth.py, node/client/tokens.py): the
token is the SASL PLAIN password (the user name is ignored), its scopes are
the connection's permissions, its `exp` closes the connection with
amqp:unauthorized-access unless a newer token came first with
`PUT /auth/tokens` on the /management node, whose scopes then rule new
links. Real JWTs signed here (tests/support/jwt_tokens.py), driven by
python-qpid-proton and by RabbitMQ's own client with its OAuth2Options."""

from __future__ import annotations

import time

import jwt
import pytest
from jwt_tokens import ALL, Issuer
from proton import ConnectionException, Message
from proton.utils import BlockingConnection, ConnectionClosed
from rabbitmq_amqp_python_client import (
    AddressHelper,
    ClassicQueueSpecification,
    Environment,
    ExchangeSpecification,
    ExchangeToQueueBindingSpecification,
    OAuth2Options,
    OutcomeState,
    QuorumQueueSpecification,
    RecoveryConfiguration,
    ValidationCodeException,
)
from rabbitmq_amqp_python_client import Message as ClientMessage
from rabbitmq_amqp_python_client.qpid.proton.utils import LinkDetached
from rmq_client import consume, request

pytestmark = pytest.mark.timeout(60)

QUEUE = "orders"


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture
def oauth_broker(broker_factory, issuer):
    b = broker_factory(**issuer.settings())
    b.declare_queue(QUEUE)
    return b


def proton_connect(broker, token: str, user: str = "ignored") -> BlockingConnection:
    return BlockingConnection(f"amqp://127.0.0.1:{broker.port}", user=user, password=token, allowed_mechs="PLAIN",
                              timeout=10)  # fmt: skip


class OfficialClient:
    """RabbitMQ's client logged in with a token, as its OAuth example does."""

    def __init__(self, broker, token: str):
        self.env = Environment(f"amqp://127.0.0.1:{broker.port}", oauth2_options=OAuth2Options(token=token),
                               recovery_configuration=RecoveryConfiguration(active_recovery=False))  # fmt: skip
        self.conn = self.env.connection()
        self.conn.dial()

    def close(self) -> None:
        try:
            self.env.close()
        except BaseException:  # the node may have closed it already
            pass


@pytest.fixture
def official():
    clients: list[OfficialClient] = []

    def make(broker, token: str) -> OfficialClient:
        client = OfficialClient(broker, token)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def handler_of(broker, user: str):
    return next(c for c in broker.broker.connections if c.user == user)


def wait_closed_by_node(conn: BlockingConnection) -> str:
    """Waits (on the connection's own events) for the node's CLOSE; its error."""
    with pytest.raises(ConnectionClosed) as closed:
        conn.wait(lambda: False, timeout=20, msg="the node did not close the connection")
    return str(closed.value)


# ---------------------------------------------------------------- logging in


def test_a_valid_token_is_the_plain_password_and_its_subject_the_user(oauth_broker, issuer):
    conn = proton_connect(oauth_broker, issuer.token(ALL, sub="svc-orders"), user="whatever")
    try:
        conn.create_sender(QUEUE).send(Message(body="via token"))
        assert conn.create_receiver(QUEUE).receive(timeout=10).body == "via token"
        assert handler_of(oauth_broker, "svc-orders").info()["user"] == "svc-orders"
    finally:
        conn.close()


@pytest.mark.parametrize("kid", ["hmac", "ec"])
def test_symmetric_and_ec_keys_sign_valid_tokens(oauth_broker, issuer, kid):
    conn = proton_connect(oauth_broker, issuer.token(ALL, kid=kid))
    conn.close()


@pytest.mark.parametrize("token_args", [
    {"expires_in": -5}, {"audience": "another-service"}, {"sign_with": "stranger"}, {"kid": "no-such-key"},
], ids=["expired", "wrong-audience", "wrong-key", "unknown-kid"])  # fmt: skip
def test_refused_tokens_fail_the_sasl_login(oauth_broker, issuer, caplog, token_args):
    caplog.set_level("INFO", logger="warren.login")
    with pytest.raises(ConnectionException, match="(?i)auth"):
        proton_connect(oauth_broker, issuer.token(ALL, **token_args))
    assert "token refused" in caplog.text


def test_a_token_without_a_scope_for_the_vhost_is_refused_at_open(oauth_broker, issuer, caplog):
    caplog.set_level("INFO", logger="warren.connection")
    with pytest.raises(ConnectionException):
        proton_connect(oauth_broker, issuer.token(["rabbitmq.read:other-vhost/*", "rabbitmq.tag:management"])).close()
    assert "access to vhost '/' refused for user 'token-user'" in caplog.text


def test_missing_scopes_refuse_the_links_they_would_allow(oauth_broker, issuer, official):
    client = official(oauth_broker, issuer.token(["rabbitmq.read:*/orders", "rabbitmq.write:*/amq.default"]))
    conn = client.conn
    conn.publisher(AddressHelper.queue_address(QUEUE)).publish(ClientMessage(body=b"m"))
    assert [m.body for m in consume(conn, AddressHelper.queue_address(QUEUE), 1)] == [b"m"]
    with pytest.raises(ValidationCodeException, match="403"):  # no configure scope
        conn.management().declare_queue(ClassicQueueSpecification(name="new-q"))
    oauth_broker.declare_queue("audit")
    with pytest.raises(LinkDetached, match="unauthorized-access.*read access to queue 'audit'.*'token-user'"):
        conn.consumer(AddressHelper.queue_address("audit"))


def test_users_still_log_in_with_passwords(oauth_broker):
    conn = BlockingConnection(oauth_broker.url, timeout=10)
    conn.create_sender(QUEUE).send(Message(body="as guest"))
    conn.close()


def test_tokens_are_passwords_like_any_other_when_oauth_is_off(broker, issuer):
    with pytest.raises(ConnectionException, match="(?i)auth"):
        proton_connect(broker, issuer.token(ALL, sub="guest"), user="guest")


# ---------------------------------------------------------------- expiry and refresh


def test_an_expired_token_closes_the_connection_with_unauthorized_access(oauth_broker, issuer):
    conn = proton_connect(oauth_broker, issuer.token(ALL, expires_in=2))
    error = wait_closed_by_node(conn)
    assert "amqp:unauthorized-access" in error and "credential expired" in error


def test_a_refresh_before_expiry_keeps_the_connection(oauth_broker, issuer, official):
    """Two connections with the same short token: the one the official
    client refreshes (its refresh_token API: PUT /auth/tokens) outlives the
    other, which the node closes at the token's exp."""
    short = issuer.token(ALL, expires_in=4)
    client = official(oauth_broker, short)
    control = proton_connect(oauth_broker, short)
    client.conn.refresh_token(issuer.token(ALL, expires_in=300))
    assert "credential expired" in wait_closed_by_node(control)
    conn = client.conn  # new links, after the first token's exp
    conn.publisher(AddressHelper.queue_address(QUEUE)).publish(ClientMessage(body=b"still here"))
    assert [m.body for m in consume(conn, AddressHelper.queue_address(QUEUE), 1)] == [b"still here"]


def test_a_refresh_with_fewer_scopes_removes_access_for_new_links(oauth_broker, issuer, official):
    client = official(oauth_broker, issuer.token(ALL))
    conn = client.conn
    publisher = conn.publisher(AddressHelper.queue_address(QUEUE))
    conn.refresh_token(issuer.token(["rabbitmq.read:*/*"]))
    # (another address: the client names links after theirs, and one name is one link)
    with pytest.raises(LinkDetached, match="unauthorized-access.*write access to exchange 'amq.direct'"):
        conn.publisher(AddressHelper.exchange_address("amq.direct", QUEUE))
    with pytest.raises(ValidationCodeException, match="403"):
        conn.management().declare_queue(ClassicQueueSpecification(name="new-q"))
    publisher.publish(ClientMessage(body=b"old link"))  # attached before: keeps what it was granted
    assert [m.body for m in consume(conn, AddressHelper.queue_address(QUEUE), 1)] == [b"old link"]


def test_a_refused_refresh_is_401_and_leaves_the_token_in_force(oauth_broker, issuer, official):
    client = official(oauth_broker, issuer.token(ALL))
    management = client.conn.management()
    for bad in (issuer.token(ALL, expires_in=-5), issuer.token(ALL, sign_with="stranger"), "not a token"):
        status, body = request(management, "PUT", "/auth/tokens", bad.encode())
        assert status == 401 and body.startswith("token refused")
    assert request(management, "PUT", "/auth/tokens", 42)[0] == 401
    assert request(management, "GET", "/auth/tokens")[0] == 405
    client.conn.publisher(AddressHelper.queue_address(QUEUE)).publish(ClientMessage(body=b"m"))


def test_a_refresh_as_a_string_body_is_taken_too(oauth_broker, issuer, official):
    client = official(oauth_broker, issuer.token(ALL))
    later = issuer.token(ALL, expires_in=900)
    assert request(client.conn.management(), "PUT", "/auth/tokens", later) == (204, None)
    handler = handler_of(oauth_broker, "token-user")
    assert handler.grant.expires_at == jwt.decode(later, options={"verify_signature": False})["exp"]


def test_a_password_connection_cannot_refresh_a_token(oauth_broker, issuer):
    env = Environment(oauth_broker.url, recovery_configuration=RecoveryConfiguration(active_recovery=False))
    try:
        conn = env.connection()
        conn.dial()
        status, body = request(conn.management(), "PUT", "/auth/tokens", issuer.token(ALL).encode())
        assert status == 400 and "did not log in with a token" in body
    finally:
        env.close()


def test_the_official_clients_oauth_example_flow(broker_factory, official):
    """As rabbitmq-amqp-python-client's OAuth example: an HS256 key named
    "token-key", tokens without `sub` whose scopes are a list, a refresh
    right after dialling, then topology, publishing and consuming."""
    secret = b"an example secret for hs256 tokens, 32+ bytes"
    jwk = {"kty": "oct", "k": jwt.utils.base64url_encode(secret).decode()}
    node = broker_factory(oauth_enabled=True, oauth_signing_keys={"token-key": jwk})

    def token(seconds: float) -> str:
        claims = {"iss": "unit_test", "aud": "rabbitmq", "exp": int(time.time() + seconds), "scope": ALL}
        return jwt.encode(claims, secret, algorithm="HS256", headers={"kid": "token-key"})

    client = official(node, token(3))
    client.conn.refresh_token(token(300))
    management = client.conn.management()
    management.declare_exchange(ExchangeSpecification(name="oauth-x"))
    management.declare_queue(QuorumQueueSpecification(name="oauth-q"))
    management.bind(ExchangeToQueueBindingSpecification(source_exchange="oauth-x", destination_queue="oauth-q",
                                                        binding_key="k"))  # fmt: skip
    publisher = client.conn.publisher(AddressHelper.exchange_address("oauth-x", "k"))
    assert publisher.publish(ClientMessage(body=b"hello")).remote_state == OutcomeState.ACCEPTED
    assert [m.body for m in consume(client.conn, AddressHelper.queue_address("oauth-q"), 1)] == [b"hello"]
    assert handler_of(node, "unknown").grant.expires_at > time.time() + 200
