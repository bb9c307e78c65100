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
from proton.utils import BlockingConnection

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
