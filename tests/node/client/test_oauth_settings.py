"""OAuth 2 settings (node/config.py, node/client/tokens.py): signing keys as
TOML tables, a JSON object in WARREN_OAUTH_SIGNING_KEYS or the flag, a JWKS
file or URL; a node whose keys do not load does not start."""

from __future__ import annotations

import functools
import json
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
from jwt_tokens import ALL, Issuer
from proton import ConnectionException
from proton.utils import BlockingConnection
from rabbitmq_amqp_python_client import Environment, OAuth2Options, RecoveryConfiguration

from node.broker import Broker
from node.cli import build_parser, server_config
from node.client.tokens import verifier_from_config
from node.config import Config, load
from routing.oauth import KeyConfigError

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer()


def test_keys_as_toml_tables(tmp_path, issuer):
    hmac_key = issuer.jwks()["hmac"]
    (tmp_path / "warren.toml").write_text(f"""
oauth_enabled = true
oauth_resource_server_id = "warren"
oauth_default_key = "hmac"

[oauth_signing_keys.hmac]
kty = "oct"
k = "{hmac_key["k"]}"
""")
    cfg = load(str(tmp_path / "warren.toml"), env={})
    verifier = verifier_from_config(cfg)
    grant = verifier.verify(issuer.token(["warren.read:*/*"], kid="hmac", send_kid=False, audience="warren"))
    assert grant.permission("/") is not None  # the scope prefix follows the resource server id


def test_keys_as_json_in_the_environment_and_the_flag(issuer, monkeypatch):
    keys = json.dumps({"rsa": issuer.jwks()["rsa"]})
    cfg = load(env={"WARREN_OAUTH_ENABLED": "true", "WARREN_OAUTH_SIGNING_KEYS": keys})
    assert verifier_from_config(cfg).verify(issuer.token(kid="rsa")).user == "token-user"
    for name in ("WARREN_OAUTH_ENABLED", "WARREN_OAUTH_SIGNING_KEYS"):
        monkeypatch.delenv(name, raising=False)
    cfg = server_config(build_parser().parse_args(["server", "--oauth-enabled", "--oauth-signing-keys", keys]))
    assert set(verifier_from_config(cfg).keys) == {"rsa"}


def test_off_by_default():
    assert verifier_from_config(Config()) is None


@pytest.mark.parametrize("settings", [
    {"oauth_signing_keys": {}},
    {"oauth_signing_keys": {"k": {"kty": "RSA"}}},
    {"oauth_jwks_file": "/no/such/jwks.json"},
    {"oauth_default_key": "missing"},
])  # fmt: skip
def test_a_node_with_keys_that_do_not_load_does_not_start(issuer, settings):
    cfg = Config(**issuer.settings(**settings))
    with pytest.raises(KeyConfigError):
        Broker(cfg)


def test_keys_from_a_jwks_url_read_at_start(broker_factory, issuer, tmp_path):
    issuer.jwks_file(tmp_path / "jwks.json")
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(SimpleHTTPRequestHandler,
                                                                     directory=str(tmp_path)))  # fmt: skip
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
        node = broker_factory(oauth_enabled=True, oauth_jwks_url=url)
    finally:
        server.shutdown()
        server.server_close()
    conn = BlockingConnection(f"amqp://127.0.0.1:{node.port}", user="x", password=issuer.token(ALL, kid="ec"),
                              allowed_mechs="PLAIN", timeout=10)  # fmt: skip
    conn.close()


def test_a_key_the_provider_adds_is_read_again_without_a_restart(broker_factory, issuer, tmp_path):
    """A JWKS file rewritten with a new key: the first token naming it makes
    the node read the keys again (at most once per reload interval), for
    logins and for in-band refreshes alike."""
    jwks = issuer.jwks_file(tmp_path / "jwks.json")
    node = broker_factory(oauth_enabled=True, oauth_jwks_file=str(jwks))
    verifier = node.broker.auth.tokens
    node.call(setattr, verifier, "reload_interval", 3600.0)  # once, then not again during the test
    rotated = Issuer()
    with pytest.raises(ConnectionException):
        connect(node, rotated.token(ALL, kid="rsa-2", sign_with=rotated.rsa_key))
    assert verifier.reloads == 1  # read again: nothing new yet
    document = json.loads(jwks.read_text())
    document["keys"].append(dict(rotated.jwks()["rsa"], kid="rsa-2"))
    jwks.write_text(json.dumps(document))
    with pytest.raises(ConnectionException):  # within the interval: not read again
        connect(node, rotated.token(ALL, kid="rsa-2", sign_with=rotated.rsa_key))
    assert verifier.reloads == 1
    node.call(setattr, verifier, "reload_interval", 0.0)
    connect(node, rotated.token(ALL, kid="rsa-2", sign_with=rotated.rsa_key)).close()
    assert verifier.reloads == 2


def connect(node, token: str) -> BlockingConnection:
    return BlockingConnection(f"amqp://127.0.0.1:{node.port}", user="x", password=token, allowed_mechs="PLAIN",
                              timeout=10)  # fmt: skip


def test_a_refresh_with_a_new_key_reads_the_keys_again(broker_factory, issuer, tmp_path):
    jwks = issuer.jwks_file(tmp_path / "jwks.json")
    node = broker_factory(oauth_enabled=True, oauth_jwks_file=str(jwks))
    env = Environment(f"amqp://127.0.0.1:{node.port}", oauth2_options=OAuth2Options(token=issuer.token(ALL)),
                      recovery_configuration=RecoveryConfiguration(active_recovery=False))  # fmt: skip
    try:
        conn = env.connection()
        conn.dial()
        rotated = Issuer()
        document = json.loads(jwks.read_text())
        jwks.write_text(json.dumps({"keys": document["keys"] + [dict(rotated.jwks()["ec"], kid="ec-2")]}))
        conn.refresh_token(rotated.token(ALL, kid="ec-2", sign_with=rotated.ec_key, expires_in=900))
        assert node.broker.auth.tokens.reloads == 1
    finally:
        env.close()
