"""AMQPS: the TLS listener under each tls_verify mode with valid, expired,
wrong-CA and missing client certificates (a plain `ssl` socket, proton's
SSLDomain and the official client's PosixSslConfigurationContext), SASL
EXTERNAL as the certificate's user with that user's permissions, the TLS
protocol header on the plain port, the handshake timeout, and a certificate
reload that keeps open connections."""

from __future__ import annotations

import signal
import socket
import ssl

import pytest
import rmq_client
import tls_certs
from proton import ConnectionException, Message, SSLDomain
from proton.utils import BlockingConnection, LinkDetached
from rabbitmq_amqp_python_client import (
    AddressHelper,
    Environment,
    PosixClientCert,
    PosixSslConfigurationContext,
    RecoveryConfiguration,
)
from rabbitmq_amqp_python_client import Message as ClientMessage
from tls_certs import CLIENT_CN, CLIENT_DN, Refused, sasl_mechanisms

from amqp.framing import SASL_HEADER, TLS_HEADER

VALID, EXPIRED, WRONG_CA, NONE = "client", "client-expired", "other-client", None
# (tls_verify, client certificate) -> whether the handshake succeeds
OUTCOMES = {
    # none: no certificate is asked for, so none is checked
    ("none", VALID): True, ("none", EXPIRED): True, ("none", WRONG_CA): True, ("none", NONE): True,
    # peer: a certificate sent must verify; sending none is fine
    ("peer", VALID): True, ("peer", EXPIRED): False, ("peer", WRONG_CA): False, ("peer", NONE): True,
    # require: a verified certificate or no connection
    ("require", VALID): True, ("require", EXPIRED): False, ("require", WRONG_CA): False, ("require", NONE): False,
}  # fmt: skip


def tls_broker(broker_factory, certs, verify: str = "peer", **overrides):
    overrides.setdefault("auth_mechanisms", ["PLAIN", "ANONYMOUS", "EXTERNAL"])
    return broker_factory(**certs.server_settings(verify), **overrides)


def proton_domain(certs, client: str | None = VALID) -> SSLDomain:
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(certs.ca)
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
    if client is not None:
        domain.set_credentials(certs.path(f"{client}.pem"), certs.path(f"{client}.key"), None)
    return domain


def add_certificate_user(broker, name: str) -> None:
    """The certificate's user, with no password, reading only ext-* queues."""
    broker.add_user(name, "not-used-by-external")
    broker.set_permissions(name, "/", configure="", write=".*", read="^ext-")


@pytest.mark.parametrize("verify", ["none", "peer", "require"])
def test_plain_ssl_socket_handshake_by_verify_mode(broker_factory, certs, verify):
    broker = tls_broker(broker_factory, certs, verify)
    for client in (VALID, EXPIRED, WRONG_CA, NONE):
        ctx = certs.client_context(client)
        if OUTCOMES[(verify, client)]:
            mechanisms = sasl_mechanisms(broker.broker.amqps_port, ctx)
            # EXTERNAL only where a certificate was asked for and verified
            assert ("EXTERNAL" in mechanisms) == (verify != "none" and client == VALID), client
            assert "PLAIN" in mechanisms
        else:
            with pytest.raises(Refused):
                sasl_mechanisms(broker.broker.amqps_port, ctx)


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated:DeprecationWarning")
def test_tls_below_1_2_is_refused(broker_factory, certs):
    broker = tls_broker(broker_factory, certs)
    ctx = certs.client_context()
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")  # let this client offer 1.1 at all
    with pytest.raises((Refused, ssl.SSLError)):
        sasl_mechanisms(broker.broker.amqps_port, ctx)
    ctx = certs.client_context()
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    assert "PLAIN" in sasl_mechanisms(broker.broker.amqps_port, ctx)


def test_plain_port_keeps_working_beside_amqps_and_can_be_turned_off(broker_factory, certs, tmp_path):
    both = tls_broker(broker_factory, certs)
    conn = BlockingConnection(both.url)
    conn.close()
    only_tls = tls_broker(broker_factory, certs, amqp_port=-1, data_dir=tmp_path / "only-tls")
    assert only_tls.broker.amqp_port is None
    assert "PLAIN" in sasl_mechanisms(only_tls.broker.amqps_port, certs.client_context())


def test_proton_amqps_with_password_publishes_and_consumes(broker_factory, certs):
    broker = tls_broker(broker_factory, certs, "require")
    broker.declare_queue("q")
    conn = BlockingConnection(f"amqps://localhost:{broker.broker.amqps_port}", ssl_domain=proton_domain(certs),
                              user="guest", password="guest", allowed_mechs="PLAIN")  # fmt: skip
    try:
        conn.create_sender("/queues/q").send(Message(body="over tls"))
        assert conn.create_receiver("/queues/q", credit=1).receive(timeout=10).body == "over tls"
        [handler] = list(broker.broker.connections)
        assert (handler.tls, handler.user, handler.info()["ssl"]) == (True, "guest", True)
    finally:
        conn.close()


@pytest.mark.parametrize("client", [EXPIRED, WRONG_CA, NONE])
def test_proton_refused_without_a_valid_certificate_under_require(broker_factory, certs, client):
    broker = tls_broker(broker_factory, certs, "require")
    with pytest.raises(ConnectionException):
        BlockingConnection(f"amqps://localhost:{broker.broker.amqps_port}", ssl_domain=proton_domain(certs, client),
                           user="guest", password="guest", allowed_mechs="PLAIN", timeout=10)  # fmt: skip


@pytest.mark.parametrize("login_from, user", [("distinguished_name", CLIENT_DN), ("common_name", CLIENT_CN)])
def test_external_logs_in_as_the_certificate_user_with_its_permissions(broker_factory, certs, login_from, user):
    broker = tls_broker(broker_factory, certs, "peer", ssl_cert_login_from=login_from)
    add_certificate_user(broker, user)
    broker.declare_queue("ext-q")
    broker.declare_queue("other")
    conn = BlockingConnection(f"amqps://localhost:{broker.broker.amqps_port}", ssl_domain=proton_domain(certs),
                              allowed_mechs="EXTERNAL")  # fmt: skip
    try:
        [handler] = list(broker.broker.connections)
        assert handler.user == user
        assert handler.info()["peer_cert_subject"] == CLIENT_DN
        conn.create_sender("/queues/ext-q").send(Message(body="mine"))
        assert conn.create_receiver("/queues/ext-q", credit=1).receive(timeout=10).body == "mine"
        with pytest.raises(LinkDetached, match="unauthorized-access|access"):
            conn.create_receiver("/queues/other", credit=1)
    finally:
        conn.close()


def test_external_refused_when_no_user_has_the_certificate_name(broker_factory, certs):
    broker = tls_broker(broker_factory, certs, "peer")
    with pytest.raises(ConnectionException):
        BlockingConnection(f"amqps://localhost:{broker.broker.amqps_port}", ssl_domain=proton_domain(certs),
                           allowed_mechs="EXTERNAL", timeout=10)  # fmt: skip


def test_external_offered_only_when_listed_in_auth_mechanisms(broker_factory, certs):
    broker = broker_factory(**certs.server_settings("require"))
    assert sasl_mechanisms(broker.broker.amqps_port, certs.client_context()) == ["PLAIN", "ANONYMOUS"]
    add_certificate_user(broker, CLIENT_DN)
    with pytest.raises(ConnectionException, match="unauthorized-access"):  # chosen anyway: refused
        BlockingConnection(f"amqps://localhost:{broker.broker.amqps_port}", ssl_domain=proton_domain(certs),
                           allowed_mechs="EXTERNAL", timeout=10)  # fmt: skip


def test_external_not_offered_without_a_client_certificate(broker_factory, certs):
    broker = tls_broker(broker_factory, certs, "peer")
    add_certificate_user(broker, CLIENT_DN)
    with pytest.raises(ConnectionException):
        BlockingConnection(f"amqps://localhost:{broker.broker.amqps_port}", ssl_domain=proton_domain(certs, NONE),
                           allowed_mechs="EXTERNAL", timeout=10)  # fmt: skip


def test_official_client_tls_options(broker_factory, certs):
    """rabbitmq-amqp-python-client's PosixSslConfigurationContext, with a
    client certificate under require, logging in with the password (EXTERNAL
    is not offered by default: proton would take it over the password)."""
    broker = broker_factory(**certs.server_settings("require"))
    broker.declare_queue("official")
    ssl_context = PosixSslConfigurationContext(
        ca_cert=certs.ca, client_cert=PosixClientCert(certs.path("client.pem"), certs.path("client.key")))
    env = Environment(f"amqps://guest:guest@localhost:{broker.broker.amqps_port}/", ssl_context=ssl_context,
                      recovery_configuration=RecoveryConfiguration(active_recovery=False))  # fmt: skip
    try:
        conn = env.connection()
        conn.dial()
        publisher = conn.publisher(AddressHelper.queue_address("official"))
        publisher.publish(ClientMessage(body=b"official over tls"))
        [message] = rmq_client.consume(conn, AddressHelper.queue_address("official"), 1)
        assert message.body == b"official over tls"
    finally:
        env.close()


def test_official_client_refused_with_a_certificate_of_another_ca(broker_factory, certs):
    broker = tls_broker(broker_factory, certs, "peer")
    ssl_context = PosixSslConfigurationContext(
        ca_cert=certs.ca, client_cert=PosixClientCert(certs.path("other-client.pem"), certs.path("other-client.key")))
    env = Environment(f"amqps://guest:guest@localhost:{broker.broker.amqps_port}/", ssl_context=ssl_context,
                      recovery_configuration=RecoveryConfiguration(active_recovery=False))  # fmt: skip
    with pytest.raises(Exception, match="disconnected|SSL|certificate"):  # the client's own exception types
        env.connection().dial()


def test_tls_protocol_header_on_the_plain_port_is_answered_like_rabbitmq(broker):
    """RabbitMQ does no in-band TLS upgrade: protocol id 2 gets the SASL
    header it does speak (protocol id 3), then the socket closes."""
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(TLS_HEADER)
        received = b""
        while chunk := sock.recv(1024):
            received += chunk
    assert received == SASL_HEADER


def test_a_silent_client_loses_its_socket_after_the_handshake_timeout(broker_factory, certs):
    broker = tls_broker(broker_factory, certs, handshake_timeout=0.3)
    with socket.create_connection(("127.0.0.1", broker.broker.amqps_port), timeout=10) as sock:
        assert sock.recv(1024) == b""  # no ClientHello: the server gives up on the TLS handshake
    # and the loop went on serving meanwhile
    assert "PLAIN" in sasl_mechanisms(broker.broker.amqps_port, certs.client_context())


def test_reload_keeps_open_connections_and_new_handshakes_get_the_new_certificate(broker_factory, own_certs):
    broker = tls_broker(broker_factory, own_certs, "peer")
    broker.declare_queue("q")
    port = broker.broker.amqps_port
    assert tls_certs.server_certificate_cn(port, own_certs.ca) == "localhost"
    conn = BlockingConnection(f"amqps://localhost:{port}", ssl_domain=proton_domain(own_certs), user="guest",
                              password="guest", allowed_mechs="PLAIN")  # fmt: skip
    try:
        sender = conn.create_sender("/queues/q")
        own_certs.renew_server("localhost-renewed")
        assert broker.call(broker.broker.reload_tls) is True
        assert tls_certs.server_certificate_cn(port, own_certs.ca) == "localhost-renewed"
        sender.send(Message(body="after reload"))  # the connection from before goes on
        assert conn.create_receiver("/queues/q", credit=1).receive(timeout=10).body == "after reload"
    finally:
        conn.close()


def test_a_reload_with_broken_files_keeps_the_old_certificate(broker_factory, own_certs):
    broker = tls_broker(broker_factory, own_certs, "peer")
    (own_certs.dir / "server.key").write_text("not a key")
    with pytest.raises(Exception, match="cannot load"):
        broker.call(broker.broker.reload_tls)
    assert tls_certs.server_certificate_cn(broker.broker.amqps_port, own_certs.ca) == "localhost"


def test_sighup_reloads_the_certificate(broker_process_factory, own_certs, tmp_path):
    env = {f"WARREN_{k.upper()}": v for k, v in own_certs.server_settings("peer").items()}
    proc = broker_process_factory(tmp_path / "data", extra_env=dict(env, WARREN_AMQPS_PORT="0"))
    port = int(proc.banner.split(" amqps=")[1].split()[0])
    assert tls_certs.server_certificate_cn(port, own_certs.ca) == "localhost"
    own_certs.renew_server("after-sighup")
    proc.proc.send_signal(signal.SIGHUP)
    for line in proc.proc.stderr:  # the node logs the reload once done
        if "reloaded" in line:
            break
    assert tls_certs.server_certificate_cn(port, own_certs.ca) == "after-sighup"
